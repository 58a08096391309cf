package pack

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func small() *Set {
	return &Set{Name: "s", Nodes: 4, FeatureDim: 5, Classes: 3,
		FeatOff: []int64{0, 2, 2, 5, 5}, FeatCols: []int32{0, 4, 1, 2, 3},
		Src: []int32{0, 0, 2}, Dst: []int32{1, 3, 3}, Labels: []int32{0, 2, -1, 1},
		Train: []int32{0}, Val: []int32{1}, Test: []int32{3},
		Sums: []Sum{{File: "edges.tsv"}}}
}

func TestRoundTrip(t *testing.T) {
	s := small()
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, back) {
		t.Errorf("round trip:\n%+v\n%+v", s, back)
	}
	if got := string(back.EdgesFile()); got != "0\t1\n0\t3\n2\t3\n" {
		t.Errorf("edges file %q", got)
	}
	if f := back.Features(); f[4] != 1 || f[5+1] != 0 || f[10+3] != 1 {
		t.Errorf("features %v", f)
	}
	s.Labels = nil
	buf.Reset()
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	if back, err := Decode(buf.Bytes()); err != nil || back.Labels != nil {
		t.Errorf("no labels: %v %v", back, err)
	}
}

func TestEncodeRejects(t *testing.T) {
	for name, mutate := range map[string]func(s *Set){
		"edge order":    func(s *Set) { s.Src[1], s.Dst[1] = 0, 1 },
		"src >= dst":    func(s *Set) { s.Src[2], s.Dst[2] = 3, 2 },
		"feature order": func(s *Set) { s.FeatCols[0] = 4 },
		"label":         func(s *Set) { s.Labels[0] = 3 },
		"split":         func(s *Set) { s.Train = []int32{1, 0} },
	} {
		s := small()
		mutate(s)
		if err := Encode(new(bytes.Buffer), s); err == nil {
			t.Errorf("%s: encoded a bad set", name)
		}
	}
}

func TestDecodeCorrupt(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, small()); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	raw, err := decompress(good)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(raw); i++ { // every truncation fails cleanly
		if _, err := DecodeRaw(raw[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	for _, b := range [][]byte{nil, []byte("not gzip"), good[:len(good)-3]} {
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Decode(%q): %v", b, err)
		}
	}
	if _, err := DecodeRaw(append(raw, 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
}

func decompress(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "embedded", "cora.pack")); err == nil {
		f.Add(b)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, small()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	if raw, err := decompress(buf.Bytes()); err == nil {
		f.Add(raw) // not gzipped: exercises the gzip errors; DecodeRaw below takes it
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range []func([]byte) (*Set, error){Decode, DecodeRaw} {
			s, err := dec(b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v does not wrap ErrCorrupt", err)
				}
				continue
			}
			if err := s.Check(); err != nil {
				t.Fatalf("decoded set fails Check: %v", err)
			}
			var out bytes.Buffer
			if err := Encode(&out, s); err != nil {
				t.Fatalf("re-encoding: %v", err)
			}
		}
	})
}

package sim

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestClusterRoundTrip: every preset written and read back is the same
// cluster.
func TestClusterRoundTrip(t *testing.T) {
	for _, name := range Presets() {
		c, err := Preset(name, 12)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteCluster(&b, c); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCluster(&b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v", name, got, c)
		}
	}
}

func TestParseClusterErrors(t *testing.T) {
	good := func() string {
		c, _ := Preset("pcie-a100", 2)
		var b bytes.Buffer
		WriteCluster(&b, c)
		return b.String()
	}
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", "empty input"},
		{"not JSON", "cuda x2", "invalid character"},
		{"two values", good() + good(), "more than one JSON value"},
		{"misspelt field", strings.Replace(good(), `"port_gbps"`, `"port_gpbs"`, 1), `unknown field "port_gpbs"`},
		{"pair links", strings.Replace(good(), `"name"`, `"Links": {}, "name"`, 1), `unknown field "Links"`},
		{"no devices", `{"name": "x", "devices": []}`, "no devices"},
		{"bad id", strings.Replace(good(), `"cuda:1"`, `"gpu one"`, 1), `devices[1] (gpu one): id "gpu one": want backend:index`},
		{"duplicate id", strings.Replace(good(), `"cuda:1"`, `"cuda:0"`, 1), "id cuda:0 appears twice"},
		{"zero speed", strings.Replace(good(), `"gflops": 11700`, `"gflops": 0`, 1), "gflops = 0: want a positive number"},
		{"negative bandwidth", strings.Replace(good(), `"mem_gbps": 1244`, `"mem_gbps": -1`, 1), "mem_gbps = -1"},
		{"negative memory", strings.Replace(good(), `"mem_bytes": 42949672960`, `"mem_bytes": -5`, 1), "mem_bytes -5"},
		{"overlap above 1", strings.Replace(good(), `"sms": 108`, `"sms": 108, "stream_overlap": 2`, 1), "stream_overlap = 2"},
		{"negative link", strings.Replace(good(), `"gbps": 24`, `"gbps": -24`, 1), "link: gbps -24"},
		{"negative node size", strings.Replace(good(), `"node_size": 8`, `"node_size": -8`, 1), "node_size = -8"},
		{"negative host cores", strings.Replace(good(), `"sync_transfers": false`, `"sync_transfers": false, "host_cores": -2`, 1), "host_cores = -2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.in == good() && c.name != "empty" {
				t.Fatalf("the case did not change the good cluster:\n%s", c.in)
			}
			_, err := ParseCluster([]byte(c.in))
			if err == nil || !errors.Is(err, ErrBadCluster) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want ErrBadCluster containing %q", err, c.want)
			}
		})
	}
}

// FuzzParseCluster: arbitrary bytes give a cluster that validates or an
// ErrBadCluster, never a panic.
func FuzzParseCluster(f *testing.F) {
	for _, name := range Presets() {
		c, _ := Preset(name, 3)
		var b bytes.Buffer
		WriteCluster(&b, c)
		f.Add(b.Bytes())
	}
	f.Add([]byte(`{"devices": [{"id": "cuda:0", "gflops": 1e308, "mem_gbps": 1}], "link": {"gbps": 1e-300}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCluster(b)
		if err != nil {
			if !errors.Is(err, ErrBadCluster) {
				t.Fatalf("error %v is not ErrBadCluster", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed cluster fails Validate: %v", err)
		}
		_ = c.Infos()
	})
}

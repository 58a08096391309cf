package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Write creates or replaces path with what write writes, atomically. The
// output is buffered and synced before the rename. A new file gets mode
// 0644 less the umask, as os.Create gives it (os.CreateTemp would give
// 0600); a replaced file keeps its mode. The folder must exist. On any
// error, including one that write returns or a panic in write, path is
// left as it was and the temporary file is removed.
func Write(path string, write func(io.Writer) error) error {
	tmp, err := create(path)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		if err := tmp.Chmod(st.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	return nil
}

// WriteTo is Write of what wt writes (a rendered plot, an encoder).
func WriteTo(path string, wt io.WriterTo) error {
	return Write(path, func(w io.Writer) error {
		_, err := wt.WriteTo(w)
		return err
	})
}

// WriteBytes is Write of b.
func WriteBytes(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// create opens a new temporary file beside path (a dot file, so a listing
// hides it) with mode 0644 less the umask.
func create(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("write %s: no free temporary name beside it", path)
}

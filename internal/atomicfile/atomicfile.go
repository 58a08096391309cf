package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
//
// A path that is not a regular file or a folder — a symbolic link (say
// /dev/stdout, or a link a user keeps to the latest results), a device
// or a named pipe — is written in place through it instead, since a
// rename would replace the link or the device node itself; that write is
// not atomic.
func Write(path string, write func(io.Writer) error) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("cannot write %s: it is a folder; name a file", path)
	}
	if inPlace(path) {
		return writeInPlace(path, write)
	}
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

// inPlace reports whether path exists and is neither a regular file nor
// a folder (Write then writes through it).
func inPlace(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && !st.Mode().IsRegular() && !st.IsDir()
}

// writeInPlace writes through path (a link, a device, a pipe), truncating
// a regular file a link leads to.
func writeInPlace(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
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

// Check reports, before a long run, whether Write could write path
// later: path is not a folder, its folder exists and takes new files. It
// creates a temporary file there and removes it; path is not touched.
func Check(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("cannot write %s: it is a folder; name a file", path)
	}
	if inPlace(path) {
		// Written through (Write): a link's or a device's own rules
		// apply, and opening a pipe here would wait for its reader.
		return nil
	}
	f, err := create(path)
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// create opens a new temporary file beside path (a dot file, so a listing
// hides it) with mode 0644 less the umask.
func create(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		switch {
		case errors.Is(err, os.ErrExist):
			continue
		case errors.Is(err, fs.ErrNotExist):
			return nil, &pathError{fmt.Sprintf("cannot write %s: folder %s does not exist; create it or name another file", path, filepath.Dir(path)), err}
		case errors.Is(err, fs.ErrPermission):
			return nil, &pathError{fmt.Sprintf("cannot write %s: no permission to create files in folder %s", path, filepath.Dir(path)), err}
		case err != nil:
			return nil, fmt.Errorf("cannot write %s: %w", path, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("write %s: no free temporary name beside it", path)
}

// pathError says what went wrong with the user's path, not the temporary
// file's, and wraps the error (errors.Is(err, fs.ErrNotExist) holds).
type pathError struct {
	msg string
	err error
}

func (e *pathError) Error() string { return e.msg }
func (e *pathError) Unwrap() error { return e.err }

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
	"runtime"
	"strconv"
)

// Write creates or replaces path with what write writes, atomically. The
// output is buffered and synced before the rename. A new file gets mode
// 0644 less the umask, as os.Create gives it (os.CreateTemp would give
// 0600); a replaced file keeps its mode. The folder must exist. On any
// error, including one that write returns or a panic in write, path is
// left as it was and the temporary file is removed.
//
// A symbolic link stays: the file it leads to is written so (created if
// the link dangles). The process's own standard output and error
// (/dev/stdout, /dev/fd/1, /proc/self/fd/1, and 2) get the bytes on their
// open descriptors, at their offsets (a reopened /dev/stdout redirected
// to a file would write over what was printed before). A device or a
// named pipe is written in place, not atomically: a rename would replace
// the device node or the pipe.
func Write(path string, write func(io.Writer) error) error {
	path, std, err := target(path)
	if err != nil {
		return err
	}
	if std != nil {
		return writeOpen(std, path, write)
	}
	if special(path) != 0 {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		defer f.Close()
		return writeOpen(f, path, write)
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

// target is what Write writes for path: the process's standard output
// or error (std) where path names it, else the file path's links lead to,
// which must not be a folder.
func target(path string) (string, *os.File, error) {
	if f := stream(path); f != nil {
		return path, f, nil
	}
	path, err := resolve(path)
	if err != nil {
		return "", nil, err
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return "", nil, fmt.Errorf("cannot write %s: it is a folder; name a file", path)
	}
	return path, nil, nil
}

// stream is the process's standard output or error where path names it
// (/dev/stdout, /dev/fd/1, /proc/self/fd/1; and 2), else nil.
func stream(path string) *os.File {
	if runtime.GOOS == "windows" {
		return nil
	}
	switch filepath.Clean(path) {
	case "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1":
		return os.Stdout
	case "/dev/stderr", "/dev/fd/2", "/proc/self/fd/2":
		return os.Stderr
	}
	return nil
}

// resolve follows path's symbolic links, the last one even where it
// dangles (the file it names is then created).
func resolve(path string) (string, error) {
	for range 40 {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		to, err := os.Readlink(path)
		if err != nil {
			return "", fmt.Errorf("cannot write %s: %w", path, err)
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(path), to)
		}
		path = to
	}
	return "", fmt.Errorf("cannot write %s: too many symbolic links", path)
}

// special is path's type bits where it is a device, a named pipe or a
// socket (written in place, never renamed over), else 0.
func special(path string) fs.FileMode {
	st, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return st.Mode() & (fs.ModeDevice | fs.ModeCharDevice | fs.ModeNamedPipe | fs.ModeSocket)
}

// writeOpen writes through f, which stays open.
func writeOpen(f *os.File, path string, write func(io.Writer) error) error {
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
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
	path, std, err := target(path)
	if err != nil || std != nil {
		return err
	}
	switch m := special(path); {
	case m&fs.ModeNamedPipe != 0:
		return nil // opening it here would wait for its reader
	case m&fs.ModeSocket != 0:
		return fmt.Errorf("cannot write %s: it is a socket; name a file", path)
	case m != 0:
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		return f.Close()
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

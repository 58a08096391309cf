package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// PinSuffix names a plugin's pin file: NAME.sha256 next to NAME holds its
// SHA-256 in hex, as written by `sha256sum NAME > NAME.sha256`.
const PinSuffix = ".sha256"

// Dir returns the plugin folder: $GNNKIT_PLUGIN_DIR if set, else
// gnnkit/plugins under the user's config folder (os.UserConfigDir, e.g.
// ~/.config/gnnkit/plugins on Linux). It need not exist.
func Dir() (string, error) {
	if d := os.Getenv("GNNKIT_PLUGIN_DIR"); d != "" {
		return d, nil
	}
	cfg, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("host: no plugin folder: set GNNKIT_PLUGIN_DIR (%w)", err)
	}
	return filepath.Join(cfg, "gnnkit", "plugins"), nil
}

// TimeoutEnv names the environment variable that sets each plugin call's
// deadline (Options.Timeout), e.g. GNNKIT_PLUGIN_TIMEOUT=2m.
const TimeoutEnv = "GNNKIT_PLUGIN_TIMEOUT"

// EnvTimeout reads $GNNKIT_PLUGIN_TIMEOUT: 0 (use DefaultTimeout) when it
// is unset or empty, an error when it is not a positive duration. Every
// command that launches plugins reads it through this.
func EnvTimeout() (time.Duration, error) {
	return envDuration(TimeoutEnv, "each plugin call's deadline", DefaultTimeout)
}

// StartTimeoutEnv names the environment variable that bounds a plugin's
// start (Options.StartTimeout: launch, handshake and first call), e.g.
// GNNKIT_PLUGIN_START_TIMEOUT=1m for a plugin that loads a large binary
// from a slow disk.
const StartTimeoutEnv = "GNNKIT_PLUGIN_START_TIMEOUT"

// EnvStartTimeout reads $GNNKIT_PLUGIN_START_TIMEOUT as EnvTimeout reads
// its variable: 0 (use DefaultStartTimeout) when unset or empty, an error
// when it is not a positive duration.
func EnvStartTimeout() (time.Duration, error) {
	return envDuration(StartTimeoutEnv, "the limit on a plugin's start: launch, handshake and first call", DefaultStartTimeout)
}

// EnvTimeouts checks both variables (EnvTimeout, EnvStartTimeout), for
// commands that check them before any work.
func EnvTimeouts() error {
	if _, err := EnvTimeout(); err != nil {
		return err
	}
	_, err := EnvStartTimeout()
	return err
}

func envDuration(name, what string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 30s or 2m (%s; unset it for the default %v)", name, v, what, def)
	}
	return d, nil
}

// Entry is a plugin binary found in a plugin folder.
type Entry struct {
	Name string // the file name, which --scheduler plugin:NAME refers to
	Path string
	Pin  []byte // from NAME.sha256, if present
	// Err, if set, says why this entry cannot be launched (a file that is
	// not executable, a malformed NAME.sha256); the folder's other
	// entries are unaffected. Lookup returns it for this name.
	Err error
}

// Find lists the executable files in dir (not folders, pin files, dot
// files or files without an execute bit, such as a README), sorted by
// name. An entry whose pin file is unreadable or malformed is listed with
// Err set, so one bad file does not hide the others. A missing folder has
// no plugins.
func Find(dir string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host: plugin folder: %w", err)
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, PinSuffix) {
			continue
		}
		path := filepath.Join(dir, name)
		st, err := os.Stat(path) // follows symlinks
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if !executable(st) {
			continue
		}
		e := Entry{Name: strings.TrimSuffix(name, ".exe"), Path: path}
		if e.Pin, err = ReadPin(path + PinSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.Pin = nil
			e.Err = &hostError{msg: fmt.Sprintf("host: plugin %s: %s; rewrite it (sha256sum %s > %s%s, in %s) or remove it",
				path, strings.TrimPrefix(err.Error(), "host: "), name, name, PinSuffix, dir), errs: []error{ErrLaunch, err}}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Lookup finds the plugin called name in dir. For an entry that cannot be
// launched it returns the entry and its Err.
func Lookup(dir, name string) (Entry, error) {
	es, err := Find(dir)
	if err != nil {
		return Entry{}, err
	}
	var names []string
	for _, e := range es {
		if e.Name == name {
			return e, e.Err
		}
		names = append(names, e.Name)
	}
	if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() && !executable(st) {
		path := filepath.Join(dir, name)
		return Entry{}, &hostError{msg: fmt.Sprintf("host: plugin %s: not executable; make it so with chmod +x %s", path, path),
			errs: []error{ErrLaunch}}
	}
	have := "it has none"
	if len(names) > 0 {
		have = "it has " + strings.Join(names, ", ")
	}
	return Entry{}, &hostError{msg: fmt.Sprintf("host: no plugin %q in %s (%s); use plugin:./PATH for a binary elsewhere", name, dir, have),
		errs: []error{fs.ErrNotExist}}
}

// executable reports whether a file may be run as a plugin (on Windows,
// any file: it has no execute bit).
func executable(st fs.FileInfo) bool {
	return runtime.GOOS == "windows" || st.Mode().Perm()&0o111 != 0
}

// ReadPin reads a pin file: a hex SHA-256, optionally followed by a file
// name as sha256sum writes it.
func ReadPin(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil, fmt.Errorf("host: pin file %s is empty", path)
	}
	sum, err := ParseSHA256(f[0])
	if err != nil {
		return nil, fmt.Errorf("host: pin file %s: %w", path, err)
	}
	return sum, nil
}

// ParseSHA256 decodes a hex SHA-256.
func ParseSHA256(s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%q is not a SHA-256 in hex (64 digits)", s)
	}
	return b, nil
}

// Checksum returns the SHA-256 of the file at path, in hex.
func Checksum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ResolveSpec turns a plugin spec, as --scheduler plugin:SPEC gives it,
// into the binary to launch and its Options: SPEC is a path (it has a
// slash or starts with a dot) or the NAME of a plugin in the folder dir
// returns, either with an optional @sha256:HEX pin (a NAME's pin file pins
// it otherwise; an explicit pin stands in for a malformed one); the
// options become sorted KEY=VALUE arguments, $GNNKIT_PLUGIN_TIMEOUT sets
// the calls' deadline and $GNNKIT_PLUGIN_START_TIMEOUT the start's. Every command that launches plugins resolves
// them here.
func ResolveSpec(spec string, opts map[string]string, dir func() (string, error)) (string, Options, error) {
	var o Options
	if i := strings.LastIndex(spec, "@sha256:"); i >= 0 {
		pin, err := ParseSHA256(spec[i+len("@sha256:"):])
		if err != nil {
			return "", o, err
		}
		spec, o.SHA256 = spec[:i], pin
	}
	if spec == "" {
		return "", o, errors.New("plugin: needs a path or a name, e.g. plugin:./bin/examplesched (see gnnkit plugins --help)")
	}
	path := spec
	if !strings.ContainsAny(spec, `/\`) && !strings.HasPrefix(spec, ".") {
		d, err := dir()
		if err != nil {
			return "", o, err
		}
		e, err := Lookup(d, spec)
		if err != nil && (o.SHA256 == nil || e.Path == "") {
			return "", o, err
		}
		path = e.Path
		if o.SHA256 == nil {
			o.SHA256 = e.Pin
		}
	}
	t, err := EnvTimeout()
	if err != nil {
		return "", o, err
	}
	st, err := EnvStartTimeout()
	if err != nil {
		return "", o, err
	}
	o.Timeout, o.StartTimeout = t, st
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o.Args = append(o.Args, k+"="+opts[k])
	}
	return path, o, nil
}

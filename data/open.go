package data

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Open resolves a dataset spec, as the CLI's --data flag takes it:
//
//   - "" or "cora" (or "embedded:cora"): the embedded Cora (Cora);
//   - "synthetic:KIND,key=value,...": a generated graph (ParseSynthetic,
//     Generate);
//   - a folder with meta.json (or the meta.json itself): the shared
//     layout (Load);
//   - any other file: an edge list with default options (LoadEdgeList);
//     call LoadEdgeList directly to set EdgeListOptions.
//
// The names win over paths: write "./cora" for a folder named cora.
func Open(spec string) (*Dataset, error) {
	switch s := strings.TrimSpace(spec); {
	case s == "" || s == "cora" || s == "embedded:cora":
		return Cora()
	case strings.HasPrefix(s, "synthetic:"):
		ss, err := ParseSynthetic(s)
		if err != nil {
			return nil, err
		}
		return Generate(ss)
	}
	path := spec
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &specError{what: "open", spec: spec, msg: "no such file or folder, and not a dataset name " +
				"(known: cora, synthetic:sbm,..., synthetic:rmat,..., a folder with meta.json, an edge-list file)"}
		}
		return nil, &Error{File: spec, Msg: "cannot open", Kind: ErrMissingFile, Err: err}
	}
	if !st.IsDir() {
		if filepath.Base(path) == "meta.json" {
			return Load(filepath.Dir(path))
		}
		return LoadEdgeList(path, EdgeListOptions{cli: true})
	}
	if _, err := os.Stat(filepath.Join(path, "meta.json")); err != nil {
		return nil, &Error{File: path, Msg: "a folder without meta.json; the shared layout (shared/data/README.md) describes a dataset in meta.json", Kind: ErrMissingFile, Err: err}
	}
	return Load(path)
}

package bench

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

//go:embed suites/*.json
var suiteFS embed.FS

// A Suite is a named, versioned set of workloads: the union of its
// groups' products. Suites live in bench/suites/NAME.json (embedded in
// the binary) or in any file given by path.
type Suite struct {
	Name        string `json:"name"`
	Version     int    `json:"version"`
	Description string `json:"description,omitempty"`
	// Seed, Epochs and Warmup apply to every group that does not set its
	// own. Warm-up epochs run before the measured ones and are not timed.
	Seed   uint64  `json:"seed"`
	Epochs int     `json:"epochs"`
	Warmup int     `json:"warmup"`
	Groups []Group `json:"groups"`
}

// A Group is one product of axes. "*" in Backends, Schedulers or Models
// stands for every registered name (core.Backends, core.Schedulers,
// core.Models), so a new backend or scheduler joins the matrix without
// editing a suite.
type Group struct {
	Name       string   `json:"name,omitempty"`
	Backends   []string `json:"backends"`
	Devices    []int    `json:"devices"`
	Schedulers []string `json:"schedulers"`
	Models     []string `json:"models"`
	Datasets   []string `json:"datasets"`
	// DeviceMem are per-device memory caps ("" or absent: no cap), an
	// axis of the product like the others.
	DeviceMem []string `json:"device_mem,omitempty"`
	// SchedOpts gives each scheduler its option sets, another axis: a
	// scheduler with two sets contributes two cells per combination.
	SchedOpts map[string][]map[string]string `json:"sched_opts,omitempty"`
	Epochs    int                            `json:"epochs,omitempty"`
	Warmup    int                            `json:"warmup,omitempty"`
	Seed      uint64                         `json:"seed,omitempty"`
}

// A Cell is one point of the matrix: everything a training run needs.
type Cell struct {
	Group     string            `json:"group,omitempty"`
	Backend   string            `json:"backend"`
	Devices   int               `json:"devices"`
	Scheduler string            `json:"scheduler"`
	SchedOpts map[string]string `json:"sched_opts,omitempty"`
	Model     string            `json:"model"`
	Dataset   string            `json:"dataset"`
	DeviceMem string            `json:"device_mem,omitempty"`
	Epochs    int               `json:"epochs"`
	Warmup    int               `json:"warmup"`
	Seed      uint64            `json:"seed"`
}

// ID is the cell's stable key, in benchmark-name form
// ("backend=cpu/devices=1/scheduler=cherry/mem=24MiB/model=gcn/data=cora/epochs=3+1/seed=1").
// A results file keys cells by it, so a re-run finds the finished ones.
// The group name is not part of it: the same cell in two groups is one.
func (c Cell) ID() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend=%s/devices=%d/scheduler=%s", c.Backend, c.Devices, c.Scheduler)
	if len(c.SchedOpts) > 0 {
		keys := slices.Sorted(maps.Keys(c.SchedOpts))
		kv := make([]string, len(keys))
		for i, k := range keys {
			kv[i] = k + ":" + c.SchedOpts[k]
		}
		b.WriteString("/opts=" + strings.Join(kv, ";"))
	}
	if c.DeviceMem != "" {
		b.WriteString("/mem=" + c.DeviceMem)
	}
	fmt.Fprintf(&b, "/model=%s/data=%s/epochs=%d+%d/seed=%d", c.Model, c.Dataset, c.Epochs, c.Warmup, c.Seed)
	return b.String()
}

// Workload is the part of the ID that names what is trained (model and
// data), the rows one compares across schedulers, backends and machines.
func (c Cell) Workload() string { return c.Model + " on " + c.Dataset }

// SuiteNames lists the suites embedded in the binary.
func SuiteNames() []string {
	ents, _ := suiteFS.ReadDir("suites")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

// LoadSuite returns the embedded suite NAME, or reads the file at a path
// (anything with a / or ending in .json).
func LoadSuite(nameOrPath string) (*Suite, error) {
	var raw []byte
	var err error
	if strings.ContainsAny(nameOrPath, `/\`) || strings.HasSuffix(nameOrPath, ".json") {
		raw, err = os.ReadFile(nameOrPath)
	} else {
		raw, err = suiteFS.ReadFile("suites/" + nameOrPath + ".json")
		if err != nil {
			return nil, fmt.Errorf("bench: unknown suite %q (embedded: %s; or give a path to a .json file)", nameOrPath, strings.Join(SuiteNames(), ", "))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bench: suite: %w", err)
	}
	s, err := ParseSuite(raw)
	if err != nil {
		return nil, fmt.Errorf("bench: suite %s: %w", filepath.Base(nameOrPath), err)
	}
	return s, nil
}

// ParseSuite decodes and checks a suite file. Unknown fields are errors,
// so a typo does not silently shrink the matrix.
func ParseSuite(raw []byte) (*Suite, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s Suite
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the suite object")
	}
	if s.Name == "" || s.Version <= 0 {
		return nil, errors.New("a suite needs a name and a positive version")
	}
	if len(s.Groups) == 0 {
		return nil, errors.New("a suite needs at least one group")
	}
	for i, g := range s.Groups {
		where := fmt.Sprintf("group %d", i)
		if g.Name != "" {
			where = "group " + g.Name
		}
		switch {
		case len(g.Backends) == 0, len(g.Devices) == 0, len(g.Schedulers) == 0, len(g.Models) == 0, len(g.Datasets) == 0:
			return nil, fmt.Errorf("%s: backends, devices, schedulers, models and datasets must each list at least one value", where)
		case slices.ContainsFunc(g.Devices, func(d int) bool { return d < 1 || d > 64 }):
			return nil, fmt.Errorf("%s: devices must be 1..64", where)
		case g.Epochs < 0, g.Warmup < 0:
			return nil, fmt.Errorf("%s: negative epochs or warm-up", where)
		}
		if max(g.Epochs, s.Epochs) <= 0 {
			return nil, fmt.Errorf("%s: no epochs (set epochs on the suite or the group)", where)
		}
		for _, m := range g.DeviceMem {
			if m == "" {
				continue
			}
			if _, err := core.ParseBytes(m); err != nil {
				return nil, fmt.Errorf("%s: device_mem %q: %w", where, m, err)
			}
		}
	}
	return &s, nil
}

// Digest is a short hash of the suite's definition, recorded in results
// files so a changed suite under an old version number is noticed.
func (s *Suite) Digest() string {
	b, _ := json.Marshal(s)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Cells expands the suite against the registries, in a stable order and
// without duplicates.
func (s *Suite) Cells() []Cell {
	expand := func(list []string, all func() []string) []string {
		var out []string
		for _, v := range list {
			if v == "*" {
				out = append(out, all()...)
			} else {
				out = append(out, v)
			}
		}
		return out
	}
	seen := map[string]bool{}
	var cells []Cell
	for _, g := range s.Groups {
		c := Cell{Group: g.Name, Epochs: orDefault(g.Epochs, s.Epochs), Warmup: orDefault(g.Warmup, s.Warmup), Seed: g.Seed}
		if c.Seed == 0 {
			c.Seed = max(s.Seed, 1)
		}
		mems := g.DeviceMem
		if len(mems) == 0 {
			mems = []string{""}
		}
		for _, be := range expand(g.Backends, core.Backends) {
			for _, d := range g.Devices {
				for _, sc := range expand(g.Schedulers, core.Schedulers) {
					optSets := g.SchedOpts[sc]
					if len(optSets) == 0 {
						optSets = []map[string]string{nil}
					}
					for _, opts := range optSets {
						for _, m := range expand(g.Models, core.Models) {
							for _, ds := range g.Datasets {
								for _, mem := range mems {
									cc := c
									cc.Backend, cc.Devices, cc.Scheduler, cc.SchedOpts = be, d, sc, opts
									cc.Model, cc.Dataset, cc.DeviceMem = m, ds, mem
									if id := cc.ID(); !seen[id] {
										seen[id] = true
										cells = append(cells, cc)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return cells
}

// orDefault returns v, or dflt when v is zero.
func orDefault(v, dflt int) int {
	if v != 0 {
		return v
	}
	return dflt
}

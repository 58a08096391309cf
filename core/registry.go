package core

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// BackendFactory opens a backend.
type BackendFactory func(BackendOptions) (Backend, error)

// SchedulerFactory makes a scheduler; opts are scheduler-specific settings.
type SchedulerFactory func(opts map[string]string) (Scheduler, error)

// ModelFactory builds a model from its configuration.
type ModelFactory func(ModelConfig) (*Model, error)

type registry[T any] struct {
	mu    sync.RWMutex
	kind  string
	items map[string]T
}

func (r *registry[T]) register(name string, f T, isNil bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if isNil {
		panic("core: Register" + r.kind + " factory is nil for " + name)
	}
	if _, dup := r.items[name]; dup {
		panic("core: Register" + r.kind + " called twice for " + name)
	}
	if r.items == nil {
		r.items = map[string]T{}
	}
	r.items[name] = f
}

func (r *registry[T]) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.items))
	for n := range r.items {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (r *registry[T]) get(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.items[name]
	return f, ok
}

var (
	backends   = registry[BackendFactory]{kind: "Backend"}
	schedulers = registry[SchedulerFactory]{kind: "Scheduler"}
	models     = registry[ModelFactory]{kind: "Model"}
)

// RegisterBackend makes a backend available by name. It panics on a nil
// factory or a duplicate name (call it from init).
func RegisterBackend(name string, f BackendFactory) { backends.register(name, f, f == nil) }

// RegisterScheduler makes a scheduler available by name.
func RegisterScheduler(name string, f SchedulerFactory) { schedulers.register(name, f, f == nil) }

// RegisterModel makes a model available by name.
func RegisterModel(name string, f ModelFactory) { models.register(name, f, f == nil) }

// Backends, Schedulers and Models list the registered names, sorted.
func Backends() []string   { return backends.names() }
func Schedulers() []string { return schedulers.names() }
func Models() []string     { return models.names() }

// OpenBackend opens a registered backend.
func OpenBackend(name string, opts BackendOptions) (Backend, error) {
	f, ok := backends.get(name)
	if !ok {
		hint := ""
		switch name {
		case "cuda", "opencl":
			hint = fmt.Sprintf(" (forgotten import or missing -tags %s?)", name)
		}
		return nil, fmt.Errorf("%w %q%s; registered: %s", ErrUnknownBackend, name, hint, strings.Join(Backends(), ", "))
	}
	return f(opts)
}

// NewScheduler makes a registered scheduler. Plugin schedulers
// ("plugin:PATH") are resolved by the caller.
func NewScheduler(name string, opts map[string]string) (Scheduler, error) {
	f, ok := schedulers.get(name)
	if !ok {
		return nil, fmt.Errorf("%w %q; registered: %s (or plugin:PATH)", ErrUnknownScheduler, name, strings.Join(Schedulers(), ", "))
	}
	return f(opts)
}

// BuildModel builds a registered model and validates it.
func BuildModel(name string, cfg ModelConfig) (*Model, error) {
	f, ok := models.get(name)
	if !ok {
		return nil, fmt.Errorf("%w %q; registered: %s", ErrUnknownModel, name, strings.Join(Models(), ", "))
	}
	m, err := f(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

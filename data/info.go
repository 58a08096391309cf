package data

// Info summarises a dataset for `gnnkit data info`. Fields that do not
// apply are zero and omitted from JSON.
type Info struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Source string `json:"source"`
	Nodes  int    `json:"nodes"`
	// Edges is the number of undirected edges of a symmetric graph, the
	// number of edges of a directed static graph, or the number of events
	// of a dynamic dataset.
	Edges int `json:"edges"`
	// CSREntries is the number of directed entries of Graph (2 per
	// undirected edge; for dynamic data, the distinct src -> dst pairs).
	CSREntries    int     `json:"csr_entries"`
	Directed      bool    `json:"directed"`
	FeatureDim    int     `json:"feature_dim"`
	Classes       int     `json:"classes,omitempty"`
	ClassCounts   []int   `json:"class_counts,omitempty"`
	Unlabelled    int     `json:"unlabelled,omitempty"`
	Train         int     `json:"train,omitempty"`
	Val           int     `json:"val,omitempty"`
	Test          int     `json:"test,omitempty"`
	IsolatedNodes int     `json:"isolated_nodes"`
	MaxInDegree   int     `json:"max_in_degree"`
	MaxOutDegree  int     `json:"max_out_degree"`
	MeanDegree    float64 `json:"mean_degree"` // CSR entries per node
	SelfLoops     int     `json:"self_loops"`
	// Dynamic datasets: the time range of the events (Unix seconds), the
	// recommended snapshot length and the number of snapshots it gives.
	TimeMin         int64    `json:"time_min,omitempty"`
	TimeMax         int64    `json:"time_max,omitempty"`
	SnapshotSeconds int64    `json:"snapshot_seconds,omitempty"`
	Snapshots       int      `json:"snapshots,omitempty"`
	Warnings        []string `json:"warnings,omitempty"`
}

// Info computes the summary. It reads the whole graph once.
func (d *Dataset) Info() Info {
	in := Info{
		Name: d.Name, Kind: d.Kind, Source: d.Source, Nodes: d.NumNodes,
		Edges: d.NumEdges(), Directed: d.Directed, FeatureDim: d.FeatureDim,
		Classes: d.NumClasses, Train: len(d.Train), Val: len(d.Val), Test: len(d.Test),
		Warnings: d.Warnings,
	}
	if d.Labels != nil {
		in.ClassCounts = classCounts(d.Labels, d.NumClasses)
		for _, y := range d.Labels {
			if y < 0 {
				in.Unlabelled++
			}
		}
	}
	if g := d.Graph; g != nil {
		in.CSREntries = g.NumEdges()
		in.IsolatedNodes = isolated(g)
		in.SelfLoops = selfLoops(g)
		for _, v := range g.InDegrees() {
			in.MaxInDegree = max(in.MaxInDegree, int(v))
		}
		for _, v := range g.OutDegrees() {
			in.MaxOutDegree = max(in.MaxOutDegree, int(v))
		}
		if g.NumDst > 0 {
			in.MeanDegree = float64(g.NumEdges()) / float64(g.NumDst)
		}
	}
	if len(d.Events) > 0 {
		in.TimeMin, in.TimeMax = minTime(d.Events), maxTime(d.Events)
		if d.SnapshotSeconds > 0 {
			in.SnapshotSeconds = d.SnapshotSeconds
			in.Snapshots = int((uint64(in.TimeMax)-uint64(in.TimeMin))/uint64(d.SnapshotSeconds)) + 1
		}
	}
	return in
}

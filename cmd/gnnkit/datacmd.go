package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/data/dynamic"
)

func newDataCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "data", Short: "Inspect datasets"}
	var asJSON bool
	info := &cobra.Command{
		Use:   "info PATH|cora|synthetic:SPEC",
		Short: "Check a dataset (counts, ranges, checksums) and print its summary",
		Long: `Check a dataset (counts, ranges, checksums) and print its summary. The
dataset is what --data of train (PATH, cora, synthetic:sbm,..., synthetic:rmat,...)
or of train-dynamic (PATH, synthetic:dsbm,...) takes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := openDataset(args[0])
			if err != nil {
				return err
			}
			inf := ds.Info()
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(inf)
			}
			printInfo(out, inf)
			return nil
		},
	}
	info.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(info, newDataExportCmd())
	return cmd
}

// openDataset opens a --data value as data.Open does, and also the
// synthetic dynamic generator that train-dynamic takes (synthetic:dsbm
// [,key=value...], or dsbm), which lives in package data/dynamic.
func openDataset(spec string) (*data.Dataset, error) {
	if strings.HasPrefix(spec, "synthetic:dsbm") || spec == "dsbm" {
		s, err := dynamic.ParseDSBM(spec)
		if err != nil {
			return nil, err
		}
		return dynamic.DSBM(s)
	}
	return data.Open(spec)
}

func printInfo(w io.Writer, in data.Info) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("name", in.Name)
	row("kind", in.Kind)
	row("source", in.Source)
	row("nodes", in.Nodes)
	dir := "undirected"
	if in.Directed {
		dir = "directed"
	}
	row("edges", fmt.Sprintf("%d (%s; %d CSR entries)", in.Edges, dir, in.CSREntries))
	row("degree", fmt.Sprintf("mean %.2f, max in %d, max out %d", in.MeanDegree, in.MaxInDegree, in.MaxOutDegree))
	row("isolated nodes / self-loops", fmt.Sprintf("%d / %d", in.IsolatedNodes, in.SelfLoops))
	row("features", in.FeatureDim)
	if in.Classes > 0 {
		row("classes", fmt.Sprintf("%d, counts %v, unlabelled %d", in.Classes, in.ClassCounts, in.Unlabelled))
		row("split train / val / test", fmt.Sprintf("%d / %d / %d", in.Train, in.Val, in.Test))
	}
	if in.TimeMax > 0 {
		tr := fmt.Sprintf("%d .. %d", in.TimeMin, in.TimeMax)
		if in.TimeMax-in.TimeMin >= 24*3600 { // real timestamps, not snapshot numbers (synthetic:dsbm)
			tr += fmt.Sprintf(" (%s .. %s as Unix seconds)", time.Unix(in.TimeMin, 0).UTC().Format(time.DateOnly), time.Unix(in.TimeMax, 0).UTC().Format(time.DateOnly))
		}
		row("time range", tr)
		if in.SnapshotSeconds > 0 {
			row("snapshots", fmt.Sprintf("%d of %d s", in.Snapshots, in.SnapshotSeconds))
		}
	}
	if len(in.Warnings) > 0 {
		row("warnings", strings.Join(in.Warnings, "; "))
	}
	tw.Flush()
}

package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/data"
)

func newDataCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "data", Short: "Inspect datasets"}
	var asJSON bool
	info := &cobra.Command{
		Use:   "info PATH|cora|synthetic:SPEC",
		Short: "Check a dataset and print its summary",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := data.Open(args[0])
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
			b, err := json.MarshalIndent(inf, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(out, string(b))
			return nil
		},
	}
	info.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(info)
	return cmd
}

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/klauspost/cpuid/v2"
	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/core"
)

type hostInfo struct {
	Brand         string   `json:"brand"`
	Vendor        string   `json:"vendor"`
	Family        int      `json:"family"`
	Model         int      `json:"model"`
	PhysicalCores int      `json:"physical_cores"`
	LogicalCores  int      `json:"logical_cores"`
	X86Level      int      `json:"x86_64_level"`
	L1D, L2, L3   int      `json:"-"`
	Caches        string   `json:"caches"`
	SIMD          []string `json:"simd"`
}

type backendReport struct {
	Name    string            `json:"name"`
	Error   string            `json:"error,omitempty"`
	Devices []core.DeviceInfo `json:"devices,omitempty"`
	// Worker is the worker binary serving the backend (cuda: gnnkit-cuda),
	// or its name when it was not found.
	Worker string `json:"worker,omitempty"`
}

func newDevicesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List backends, their devices and the CPU's features",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := cpuid.CPU
			h := hostInfo{Brand: c.BrandName, Vendor: c.VendorString, Family: c.Family, Model: c.Model,
				PhysicalCores: c.PhysicalCores, LogicalCores: c.LogicalCores, X86Level: c.X64Level(),
				Caches: fmt.Sprintf("L1d %s, L2 %s, L3 %s", kib(c.Cache.L1D), kib(c.Cache.L2), kib(c.Cache.L3))}
			for _, f := range []cpuid.FeatureID{cpuid.SSE4, cpuid.AVX, cpuid.AVX2, cpuid.FMA3, cpuid.F16C,
				cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX512BF16, cpuid.AVX512FP16, cpuid.AMXBF16} {
				if c.Supports(f) {
					h.SIMD = append(h.SIMD, f.String())
				}
			}
			var reps []backendReport
			for _, name := range core.Backends() {
				r := backendReport{Name: name}
				b, err := core.OpenBackend(name, core.BackendOptions{})
				if err != nil {
					r.Error = err.Error()
				} else {
					for _, d := range b.Devices() {
						r.Devices = append(r.Devices, d.Info())
					}
					b.Close()
				}
				reps = append(reps, r)
			}
			reps = append(reps, workerReports(cmd.Context())...)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"host": h, "backends": reps,
					"schedulers": core.Schedulers(), "models": core.Models()})
			}
			fmt.Fprintf(out, "CPU        %s (%s family %d model %d)\n", h.Brand, h.Vendor, h.Family, h.Model)
			fmt.Fprintf(out, "cores      %d physical, %d logical; x86-64-v%d\n", h.PhysicalCores, h.LogicalCores, h.X86Level)
			fmt.Fprintf(out, "caches     %s\n", h.Caches)
			fmt.Fprintf(out, "SIMD       %s\n\n", strings.Join(h.SIMD, " "))
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DEVICE\tBACKEND\tNAME\tTHREADS\tMEMORY\tKERNELS")
			var unavailable []string
			for _, r := range reps {
				if r.Worker != "" && r.Error != "" {
					unavailable = append(unavailable, r.Name+": "+r.Error)
					continue
				}
				if r.Error != "" {
					fmt.Fprintf(tw, "-\t%s\t%s\t\t\t\n", r.Name, r.Error)
					continue
				}
				for _, d := range r.Devices {
					mem := "unlimited"
					if d.MemCap > 0 {
						mem = core.FormatBytes(d.MemCap) + " cap"
					} else if d.MemTotal > 0 {
						mem = core.FormatBytes(d.MemTotal)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Backend, d.Name, d.Threads, mem, d.Kernel)
				}
			}
			tw.Flush()
			for _, u := range unavailable {
				fmt.Fprintln(out, u)
			}
			fmt.Fprintf(out, "\nschedulers %s\nmodels     %s\n", strings.Join(core.Schedulers(), ", "), strings.Join(core.Models(), ", "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func kib(n int) string {
	if n <= 0 {
		return "?"
	}
	return core.FormatBytes(int64(n))
}

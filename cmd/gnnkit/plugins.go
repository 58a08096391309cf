package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/host"
	"github.com/gnnkit/gnnkit/plugins/sdk"
)

// pluginHelp explains plugin:SPEC; it is shown by `gnnkit plugins --help`.
const pluginHelp = `Scheduler plugins are separate binaries that gnnkit starts at run time and
talks to over a versioned gRPC protocol (see plugins/ in the source and
plugins/examples/examplesched for one to copy).

  --scheduler plugin:PATH          a plugin binary, e.g. plugin:./bin/examplesched
                                   (PATH contains a / or starts with .)
  --scheduler plugin:NAME          NAME from the plugin folder (gnnkit plugins list),
                                   pinned by NAME.sha256 next to it if present
  --scheduler plugin:SPEC@sha256:HEX   refuse the binary unless its SHA-256 is HEX
  --sched-opt KEY=VALUE            passed to the plugin as the argument KEY=VALUE

The plugin folder is $GNNKIT_PLUGIN_DIR, by default gnnkit/plugins under the
user's config folder; 'gnnkit plugins list' shows its executable files and,
for one with a malformed NAME.sha256, what is wrong (files without an
execute bit, such as a README, are not plugins).

Each call to a plugin has a deadline of 30 s ($GNNKIT_PLUGIN_TIMEOUT, e.g.
2m, for train and bench run); a plugin that passes it is killed. A plugin
has 20 s to start, complete its handshake and say its name
($GNNKIT_PLUGIN_START_TIMEOUT, e.g. 1m; 10 s in 'plugins list' unless set).
Ctrl-C, SIGTERM or SIGHUP kills a running plugin with gnnkit's run.
GNNKIT_PLUGIN_LOG=debug shows the plugins' logs.

A built-in scheduler can run as a plugin too, e.g. to test the protocol:
put this two-line script in the plugin folder as seq-plugin, chmod +x it,

  #!/bin/sh
  exec gnnkit plugins serve sequential "$@"

and train with --scheduler plugin:seq-plugin.`

func newPluginsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List scheduler plugins, or serve a built-in scheduler as one",
		Long:  pluginHelp,
	}
	cmd.AddCommand(newPluginsListCmd(), newPluginsServeCmd())
	return cmd
}

type pluginReport struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	Scheduler string `json:"scheduler,omitempty"`
	Protocol  int    `json:"protocol,omitempty"`
	Feedback  bool   `json:"feedback,omitempty"`
	SHA256    string `json:"sha256"`
	Pinned    bool   `json:"pinned"`
	Error     string `json:"error,omitempty"`
}

func newPluginsListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Start each plugin in the plugin folder and show its name, protocol version and SHA-256",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start, err := host.EnvStartTimeout() // as train and bench run: checked before any plugin starts
			if err != nil {
				return err
			}
			if start == 0 {
				start = 10 * time.Second
			}
			dir, err := pluginDir()
			if err != nil {
				return err
			}
			entries, err := host.Find(dir)
			if err != nil {
				return err
			}
			reps := make([]pluginReport, 0, len(entries))
			for _, e := range entries {
				reps = append(reps, inspectPlugin(cmd.Context(), e, start))
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"dir": dir, "plugins": reps})
			}
			fmt.Fprintf(out, "plugin folder: %s\n", dir)
			if len(reps) == 0 {
				fmt.Fprintln(out, "no plugins (put executables there, or use --scheduler plugin:./PATH)")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSCHEDULER\tPROTOCOL\tSHA256\tPINNED\tSTATUS")
			for _, r := range reps {
				status, proto := "ok", "-"
				if r.Error != "" {
					status = "error: " + r.Error
				} else {
					proto = fmt.Sprint(r.Protocol)
				}
				if r.Feedback {
					status += " (feedback)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", r.Name, orDash(r.Scheduler), proto, r.SHA256, r.Pinned, status)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// inspectPlugin launches one plugin, allowed start to start, to ask its
// name and version.
func inspectPlugin(ctx context.Context, e host.Entry, start time.Duration) pluginReport {
	r := pluginReport{Name: e.Name, Path: e.Path, Pinned: e.Pin != nil}
	sum, err := host.Checksum(e.Path)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.SHA256 = sum
	if e.Err != nil { // a malformed pin: listed, not started
		r.Error = strings.TrimPrefix(e.Err.Error(), "host: plugin "+e.Path+": ")
		return r
	}
	p, err := host.Start(ctx, e.Path, host.Options{SHA256: e.Pin, StartTimeout: start, Timeout: 10 * time.Second})
	if err != nil {
		r.Error = strings.TrimPrefix(err.Error(), "host: plugin "+e.Path+": ")
		return r
	}
	defer p.Close()
	i := p.Info()
	r.Scheduler, r.Protocol, r.Feedback = i.Name, i.ProtocolVersion, i.Feedback
	return r
}

func newPluginsServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve NAME [KEY=VALUE ...]",
		Short: "Serve a built-in scheduler as a plugin (run by gnnkit, not by hand)",
		Long: `Serve runs the built-in scheduler NAME, with the given options, as a
scheduler plugin on stdin/stdout, for a gnnkit host that launched this
process. See 'gnnkit plugins --help' for the wrapper script that makes
--scheduler plugin:... start it.`,
		Example: "  gnnkit plugins serve sequential device=cpu:1",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := map[string]string{}
			for _, kv := range args[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("plugins serve: option %q: want KEY=VALUE", kv)
				}
				opts[k] = v
			}
			s, err := core.NewScheduler(args[0], opts)
			if err != nil {
				return err
			}
			if !sdk.LaunchedByHost() {
				return fmt.Errorf("plugins serve %s: this command is started by a gnnkit host, not by hand; "+
					"see 'gnnkit plugins --help' for the wrapper script that runs it with --scheduler plugin:PATH", args[0])
			}
			sdk.Serve(s)
			return nil
		},
	}
}

// launchPlugin starts the plugin named by spec (see pluginHelp), passing
// the scheduler options as KEY=VALUE arguments in sorted order.
func launchPlugin(ctx context.Context, spec string, opts map[string]string) (core.Scheduler, io.Closer, error) {
	path, o, err := host.ResolveSpec(spec, opts, pluginDir)
	switch {
	case err != nil && spec == "":
		return nil, nil, fmt.Errorf("--scheduler %w", err)
	case err != nil:
		return nil, nil, fmt.Errorf("--scheduler plugin:%s: %w", spec, err)
	}
	return host.Launch(ctx, path, o)
}

// pluginDir is host.Dir with a folder GNNKIT_PLUGIN_DIR names checked
// first, so that an error names the variable (a file there failed every
// plugin look-up with "plugin folder: open …: not a directory"). A
// missing folder is left to host.Find, for which it has no plugins.
func pluginDir() (string, error) {
	dir, err := host.Dir()
	if err != nil {
		return "", err
	}
	env := os.Getenv("GNNKIT_PLUGIN_DIR")
	if env == "" {
		return dir, nil
	}
	st, err := os.Stat(env)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dir, nil
	case err != nil:
		return "", fmt.Errorf("GNNKIT_PLUGIN_DIR=%s: %w; point it at a readable folder of plugin executables, or unset it", env, err)
	case !st.IsDir():
		return "", fmt.Errorf("GNNKIT_PLUGIN_DIR=%s is a file, not a folder: point it at the folder that holds the plugin executables, or unset it for the default (gnnkit/plugins under the user's config folder)", env)
	}
	if _, err := os.ReadDir(env); err != nil {
		return "", fmt.Errorf("GNNKIT_PLUGIN_DIR=%s: %w; point it at a readable folder of plugin executables, or unset it", env, err)
	}
	return dir, nil
}

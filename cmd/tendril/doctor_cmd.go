package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/assistant"
)

func init() { register(newDoctorCmd) }

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Show the effective configuration (secrets masked) and check every dependency",
		Long: `Doctor loads tendril.json and the environment exactly as "serve" does, prints
the effective configuration with secrets masked, and checks each configured
dependency: the home directory, the model references and their endpoints, the
persona, every skill (malformed skills are reported, not fatal), PostgreSQL,
Redis and Telegram. It exits 1 when a check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			rep := assistant.Doctor(cmd.Context(), cfg, assistant.DoctorOptions{Timeout: timeout})
			// What serve would refuse to start with (GOGC, AUTOMEMLIMIT,
			// TENDRIL_GC_HEADROOM_MB) is a failed check beside the others,
			// not an error that hides the report.
			env := assistant.Check{Name: "runtime env", Status: assistant.CheckOK, Detail: "GOGC, AUTOMEMLIMIT, TENDRIL_GC_HEADROOM_MB"}
			if _, err := checkRuntimeEnv(); err != nil {
				env.Status, env.Detail, rep.OK = assistant.CheckFail, err.Error(), false
			}
			rep.Checks = append(rep.Checks, env)
			out := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.MarshalIndent(rep, "", "  ")
				fmt.Fprintln(out, string(b))
			} else {
				src := rep.ConfigFile
				if src == "" {
					src = "(no tendril.json; defaults + environment)"
				}
				fmt.Fprintf(out, "Home:   %s\nConfig: %s\n\nEffective configuration (secrets masked):\n", rep.Home, src)
				b, _ := json.MarshalIndent(rep.Config, "", "  ")
				fmt.Fprintln(out, string(b))
				fmt.Fprintln(out, "\nChecks:")
				for _, c := range rep.Checks {
					fmt.Fprintf(out, "  [%-4s] %-18s %s\n", c.Status, c.Name, c.Detail)
				}
			}
			if !rep.OK {
				return silentErr{fmt.Errorf("doctor: a check failed"), 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "overall time limit for the dependency checks")
	return cmd
}

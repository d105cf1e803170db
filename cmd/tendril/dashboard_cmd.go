package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/mgmt"
	"github.com/tendrilai/tendril/internal/web/dashboard"
)

func init() { register(newDashboardCmd) }

func newDashboardCmd(g *globals) *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "dashboard [--open]",
		Short: "Print (or open) a sign-in link for the local dashboard",
		Long: `Prints the address of the web dashboard that "tendril serve" runs on this home
(Chat, Sessions, Memory, Approvals, State, Schedules, Settings), as the running
server gives it (its own address and token). With an auth token the link signs the
browser in once: it is valid for 10 minutes and for one use, and sets an HttpOnly
session cookie. Without a token (loopback only) it is the plain address. With no
server running it is built from this command's configuration. --open also opens it
in the default browser.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			// The running server knows its address and token; this
			// command's environment may not (serve --addr, a token set
			// only in the service's environment).
			var link string
			if cl, err := mgmt.DialSocket(c.Context(), filepath.Join(cfg.Home, mgmt.SocketName)); err == nil {
				var out mgmt.DashboardLink
				if err := cl.API(c.Context(), "POST", "/dashboard/link", nil, nil, &out); err != nil {
					return err
				}
				link = out.Link
			} else {
				link = dashboard.SignInLink(dashboard.BaseURL(cfg.Addr), cfg.AuthToken, time.Now())
				defer fmt.Fprintln(c.ErrOrStderr(), "tendril: no server is running on", cfg.Home+"; start it with: tendril serve")
			}
			fmt.Fprintln(c.OutOrStdout(), link)
			if open {
				return openBrowser(link)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the link in the default browser")
	return cmd
}

func openBrowser(link string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", link)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", link)
	default:
		cmd = exec.Command("xdg-open", link)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open a browser: %w (open the link above by hand)", err)
	}
	return cmd.Process.Release() // the browser outlives us
}

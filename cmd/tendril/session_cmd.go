package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/mgmt"
	"github.com/tendrilai/tendril/internal/session"
)

func init() { register(newSessionCmd) }

const sessionKeyHelp = `A session key is "<channel>:<id>", e.g. "telegram:12345" or "web:dashboard".`

func newSessionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "List, show, branch, export and clear conversation sessions",
		Long: `Sessions are conversation trees: every node points at its parent, and the active leaf
decides which branch the next message continues. They are stored as JSONL under
$TENDRIL_HOME/agents/<agent>/sessions/, or in Redis when TENDRIL_REDIS_URL is set.

` + sessionKeyHelp,
	}
	var agent string
	var asJSON bool
	agentFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&agent, "agent", "", `agent ID (default the config's agentId, "main")`)
	}
	path := func(key, suffix string) string { return "/sessions/" + url.PathEscape(key) + suffix }
	q := func() url.Values { return url.Values{"agent": {agent}} }

	list := &cobra.Command{
		Use:   "list",
		Short: "List an agent's sessions with their size and branches",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return g.with(c, func(ctx context.Context, cn *conn) error {
				var rows []assistant.SessionRow
				if err := cn.API(ctx, "GET", "/sessions", q(), nil, &rows); err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(c.OutOrStdout()).Encode(rows)
				}
				return emit(c, false, rows, func(w io.Writer) error {
					if len(rows) == 0 {
						fmt.Fprintln(w, "no sessions")
					}
					for _, r := range rows {
						fmt.Fprintf(w, "%-30s %5d nodes %3d branches  %s\n", r.Key, r.Nodes, r.Branches, r.LastText)
					}
					return nil
				})
			})
		},
	}
	agentFlag(list)
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")

	var tree bool
	show := &cobra.Command{
		Use:   "show <key>",
		Short: "Show a session's active branch, or its whole tree with --tree",
		Long:  "Show prints the active branch, root first; --tree draws every branch ('*' marks the active path).\n\n" + sessionKeyHelp,
		Args:  idArg("session key"),
		RunE: func(c *cobra.Command, args []string) error {
			return g.with(c, func(ctx context.Context, cn *conn) error {
				if asJSON {
					return cn.API(ctx, "GET", path(args[0], "/export"), url.Values{"agent": {agent}, "format": {"json"}}, nil, c.OutOrStdout())
				}
				var t assistant.SessionTree
				if err := cn.API(ctx, "GET", path(args[0], ""), q(), nil, &t); err != nil {
					return err
				}
				showInputs(t.Nodes)
				showInputs(t.ActivePath)
				w := c.OutOrStdout()
				if tree {
					return session.WriteTree(w, t.Nodes, t.Leaf)
				}
				for _, n := range t.ActivePath {
					fmt.Fprintf(w, "%s  %-9s %s\n", n.ID, n.Role, strings.ReplaceAll(n.PlainText(), "\n", "\n"+strings.Repeat(" ", len(n.ID)+12)))
				}
				return nil
			})
		},
	}
	agentFlag(show)
	show.Flags().BoolVar(&tree, "tree", false, "draw the whole branch structure")
	show.Flags().BoolVar(&asJSON, "json", false, "print one JSON document {key, leaf, nodes, branches}")

	var from string
	branch := &cobra.Command{
		Use:   "branch <key> --from <nodeId>",
		Short: "Make a node the active leaf: the next message starts a new branch there",
		Long:  "Branch makes <nodeId> the active leaf; the old branch stays and can be switched back to by naming its leaf.\n\n" + sessionKeyHelp,
		Args:  idArg("session key"),
		RunE: func(c *cobra.Command, args []string) error {
			if strings.TrimSpace(from) == "" {
				return usagef("--from <nodeId> is required")
			}
			return g.with(c, func(ctx context.Context, cn *conn) error {
				if err := cn.API(ctx, "POST", path(args[0], "/branch"), q(), map[string]string{"from": from}, nil); err != nil {
					return err
				}
				_, err := fmt.Fprintf(c.OutOrStdout(), "active leaf of %s is now %s; the next message starts a new branch there\n", args[0], from)
				return err
			})
		},
	}
	agentFlag(branch)
	branch.Flags().StringVar(&from, "from", "", "node ID to branch from (required)")

	var format, output string
	export := &cobra.Command{
		Use:   "export <key> --format json|jsonl|md",
		Short: "Export a session as JSON, JSON Lines or Markdown",
		Args:  idArg("session key"),
		RunE: func(c *cobra.Command, args []string) error {
			switch format {
			case session.FormatJSON, session.FormatJSONL, session.FormatMD:
			default:
				return usagef("--format must be json, jsonl or md, not %q", format)
			}
			return g.with(c, func(ctx context.Context, cn *conn) error {
				var w io.Writer = c.OutOrStdout()
				if output != "" {
					f, err := os.Create(output)
					if err != nil {
						return err
					}
					defer f.Close()
					w = f
				}
				return cn.API(ctx, "GET", path(args[0], "/export"), url.Values{"agent": {agent}, "format": {format}}, nil, w)
			})
		},
	}
	agentFlag(export)
	export.Flags().StringVar(&format, "format", "json", "json, jsonl or md")
	export.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")

	var key string
	var all bool
	clear := &cobra.Command{
		Use:   "clear --session <key> | --all",
		Short: "Delete one session or every session of an agent",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if (key == "") == !all {
				return usagef("give exactly one of --session <key> or --all")
			}
			req := mgmt.ClearRequest{Agent: agent, All: all}
			if key != "" {
				req.Keys = []string{key}
			}
			return g.with(c, func(ctx context.Context, cn *conn) error {
				var out struct {
					Cleared []string `json:"cleared"`
				}
				if err := cn.API(ctx, "POST", "/sessions/clear", nil, req, &out); err != nil {
					return err
				}
				for _, k := range out.Cleared {
					fmt.Fprintf(c.OutOrStdout(), "cleared %s\n", k)
				}
				if len(out.Cleared) == 0 {
					fmt.Fprintln(c.OutOrStdout(), "no sessions to clear")
				}
				return nil
			})
		},
	}
	agentFlag(clear)
	clear.Flags().StringVar(&key, "session", "", "session key <channel>:<id>")
	clear.Flags().BoolVar(&all, "all", false, "clear every session of the agent")
	cmd.AddCommand(list, show, branch, export, clear)
	return cmd
}

// showInputs makes the tool_use inputs of nodes display as written
// (showJSON): "echo a >> f", not "echo a \u003e\u003e f".
func showInputs(nodes []session.Node) {
	for i := range nodes {
		for j := range nodes[i].Blocks {
			if b := &nodes[i].Blocks[j]; b.Type == session.BlockToolUse {
				b.Input = json.RawMessage(showJSON(b.Input))
			}
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/session"
	"github.com/tendrilai/tendril/internal/session/jsonl"
	"github.com/tendrilai/tendril/internal/session/redisstore"
)

func init() { register(newSessionCmd) }

const sessionKeyHelp = `A session key is "<channel>:<id>", e.g. "telegram:12345" or "web:dashboard":
the channel is everything before the first ':' and the ID everything after it.`

// openSessionStore opens the session store the server uses: Redis when
// redisUrl / TENDRIL_REDIS_URL is set, else the JSONL files under
// $TENDRIL_HOME/agents.
func openSessionStore(cfg *config.Config) (session.Store, error) {
	if cfg.RedisURL != "" {
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		c := redis.NewClient(opt)
		return closingRedis{redisstore.New(c, "tendril"), c}, nil
	}
	dir := filepath.Join(cfg.Home, "agents")
	st, err := jsonl.Open(dir, jsonl.Options{Fsync: cfg.Session.Fsync})
	if err != nil {
		return nil, fmt.Errorf("open sessions %s: %w", dir, err)
	}
	return st, nil
}

// closingRedis closes the CLI's own client with the store.
type closingRedis struct {
	*redisstore.Store
	c *redis.Client
}

func (c closingRedis) Close() error { return c.c.Close() }

type sessionFlags struct {
	agent string
	json  bool
}

func (f *sessionFlags) agentID(cfg *config.Config) string {
	if f.agent != "" {
		return f.agent
	}
	if cfg.AgentID != "" {
		return cfg.AgentID
	}
	return "main"
}

func newSessionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "List, show, branch, export and clear conversation sessions",
		Long: `Sessions are conversation trees: every message node points at its parent, and the
active leaf decides which branch the next message continues. They are stored in
$TENDRIL_HOME/agents/<agent>/sessions/<channel>_<id>.jsonl, or in Redis when
TENDRIL_REDIS_URL is set.

` + sessionKeyHelp,
	}
	cmd.AddCommand(newSessionListCmd(g), newSessionShowCmd(g), newSessionBranchCmd(g),
		newSessionExportCmd(g), newSessionClearCmd(g))
	return cmd
}

// withSessions loads config, opens the store and runs fn.
func withSessions(g *globals, fn func(ctx context.Context, cfg *config.Config, st session.Store) error) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	st, err := openSessionStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(context.Background(), cfg, st)
}

func addAgentFlag(c *cobra.Command, f *sessionFlags) {
	c.Flags().StringVar(&f.agent, "agent", "", `agent ID (default the config's agentId, "main")`)
}

func newSessionListCmd(g *globals) *cobra.Command {
	f := &sessionFlags{}
	c := &cobra.Command{
		Use:   "list",
		Short: "List an agent's sessions with their size and branches",
		Example: `  tendril session list
  tendril session list --agent support --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withSessions(g, func(ctx context.Context, cfg *config.Config, st session.Store) error {
				keys, err := st.List(ctx, f.agentID(cfg))
				if err != nil {
					return err
				}
				type row struct {
					Key      string `json:"key"`
					AgentID  string `json:"agentId"`
					Channel  string `json:"channel"`
					ID       string `json:"id"`
					Nodes    int    `json:"nodes"`
					Branches int    `json:"branches"`
					Leaf     string `json:"leaf"`
					LastText string `json:"lastText"`
				}
				rows := []row{}
				for _, k := range keys {
					nodes, err := st.Nodes(ctx, k)
					if err != nil {
						return err
					}
					br, err := session.Branches(ctx, st, k)
					if err != nil {
						return err
					}
					r := row{Key: k.String(), AgentID: k.AgentID, Channel: k.Channel, ID: k.ID, Nodes: len(nodes), Branches: len(br)}
					for _, b := range br {
						if b.Active {
							r.Leaf, r.LastText = b.LeafID, b.LastText
						}
					}
					rows = append(rows, r)
				}
				out := cmd.OutOrStdout()
				if f.json {
					return json.NewEncoder(out).Encode(rows)
				}
				if len(rows) == 0 {
					fmt.Fprintln(out, "no sessions")
					return nil
				}
				for _, r := range rows {
					fmt.Fprintf(out, "%-30s %5d nodes %3d branches  %s\n", r.Key, r.Nodes, r.Branches, r.LastText)
				}
				return nil
			})
		},
	}
	addAgentFlag(c, f)
	c.Flags().BoolVar(&f.json, "json", false, "print one JSON document")
	return c
}

func parseSessionKey(cfg *config.Config, f *sessionFlags, s string) (session.Key, error) {
	k, err := session.ParseKey(f.agentID(cfg), s)
	if err != nil {
		return k, usagef("%v\n%s", err, sessionKeyHelp)
	}
	return k, nil
}

func newSessionShowCmd(g *globals) *cobra.Command {
	f := &sessionFlags{}
	var tree bool
	c := &cobra.Command{
		Use:   "show <key>",
		Short: "Show a session's active branch, or its whole tree with --tree",
		Long: `Show prints the active branch of a session, root first. With --tree it draws every
branch; '*' marks the active path and "(leaf)" the active leaf.

` + sessionKeyHelp,
		Example: `  tendril session show telegram:12345
  tendril session show telegram:12345 --tree
  tendril session show web:dashboard --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSessions(g, func(ctx context.Context, cfg *config.Config, st session.Store) error {
				k, err := parseSessionKey(cfg, f, args[0])
				if err != nil {
					return err
				}
				nodes, err := st.Nodes(ctx, k)
				if err != nil {
					return err
				}
				if len(nodes) == 0 {
					return fmt.Errorf("no session %s for agent %s", k, k.AgentID)
				}
				leaf, err := st.Leaf(ctx, k)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if f.json {
					return session.Export(ctx, st, k, session.FormatJSON, out)
				}
				if tree {
					return session.WriteTree(out, nodes, leaf)
				}
				path, err := st.Path(ctx, k, leaf, 0)
				if err != nil {
					return err
				}
				for _, n := range path {
					fmt.Fprintf(out, "%s  %-9s %s\n", n.ID, n.Role, strings.ReplaceAll(n.PlainText(), "\n", "\n"+strings.Repeat(" ", len(n.ID)+12)))
				}
				return nil
			})
		},
	}
	addAgentFlag(c, f)
	c.Flags().BoolVar(&tree, "tree", false, "draw the whole branch structure")
	c.Flags().BoolVar(&f.json, "json", false, "print one JSON document {key, leaf, nodes, branches}")
	return c
}

func newSessionBranchCmd(g *globals) *cobra.Command {
	f := &sessionFlags{}
	var from string
	c := &cobra.Command{
		Use:   "branch <key> --from <nodeId>",
		Short: "Start a new branch at a node (the next message continues from there)",
		Long: `Branch makes <nodeId> the active leaf, so the next message becomes a new sibling
path from that node; the old branch stays and can be switched back to with
another branch command naming its leaf. Node IDs are shown by "session show".

` + sessionKeyHelp,
		Example: `  tendril session branch telegram:12345 --from msg_01J9Z3...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return usagef("--from <nodeId> is required")
			}
			return withSessions(g, func(ctx context.Context, cfg *config.Config, st session.Store) error {
				k, err := parseSessionKey(cfg, f, args[0])
				if err != nil {
					return err
				}
				if err := session.BranchFrom(ctx, st, k, from); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "active leaf of %s is now %s; the next message starts a new branch there\n", k, from)
				return nil
			})
		},
	}
	addAgentFlag(c, f)
	c.Flags().StringVar(&from, "from", "", "node ID to branch from (required)")
	return c
}

func newSessionExportCmd(g *globals) *cobra.Command {
	f := &sessionFlags{}
	var format, output string
	c := &cobra.Command{
		Use:   "export <key> --format json|jsonl|md",
		Short: "Export a session as JSON, JSON Lines or Markdown",
		Long: `Export writes a session to stdout (or --output): json is one document with every
node and branch, jsonl one node per line, md a readable transcript of the active
branch.

` + sessionKeyHelp,
		Example: `  tendril session export telegram:12345 --format json > history.json
  tendril session export telegram:12345 --format md -o chat.md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case session.FormatJSON, session.FormatJSONL, session.FormatMD:
			default:
				return usagef("--format must be json, jsonl or md, not %q", format)
			}
			return withSessions(g, func(ctx context.Context, cfg *config.Config, st session.Store) error {
				k, err := parseSessionKey(cfg, f, args[0])
				if err != nil {
					return err
				}
				if nodes, err := st.Nodes(ctx, k); err != nil {
					return err
				} else if len(nodes) == 0 {
					return fmt.Errorf("no session %s for agent %s", k, k.AgentID)
				}
				var w io.Writer = cmd.OutOrStdout()
				if output != "" {
					file, err := os.Create(output)
					if err != nil {
						return err
					}
					defer file.Close()
					w = file
				}
				return session.Export(ctx, st, k, format, w)
			})
		},
	}
	addAgentFlag(c, f)
	c.Flags().StringVar(&format, "format", "json", "json, jsonl or md")
	c.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return c
}

func newSessionClearCmd(g *globals) *cobra.Command {
	f := &sessionFlags{}
	var key string
	var all bool
	c := &cobra.Command{
		Use:   "clear --agent A --session <key> | --all",
		Short: "Delete one session or all sessions of an agent",
		Long: `Clear deletes a session's history for good (files are removed, not archived).
Use --session for one session or --all for every session of the agent.

` + sessionKeyHelp,
		Example: `  tendril session clear --agent main --session telegram:12345
  tendril session clear --agent myagent --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (key == "") == !all {
				return usagef("give exactly one of --session <key> or --all")
			}
			return withSessions(g, func(ctx context.Context, cfg *config.Config, st session.Store) error {
				var keys []session.Key
				if all {
					var err error
					if keys, err = st.List(ctx, f.agentID(cfg)); err != nil {
						return err
					}
				} else {
					k, err := parseSessionKey(cfg, f, key)
					if err != nil {
						return err
					}
					keys = []session.Key{k}
				}
				for _, k := range keys {
					if err := st.Clear(ctx, k); err != nil {
						if errors.Is(err, session.ErrNotFound) {
							return fmt.Errorf("no session %s for agent %s", k, k.AgentID)
						}
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "cleared %s\n", k)
				}
				if all && len(keys) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no sessions to clear")
				}
				return nil
			})
		},
	}
	addAgentFlag(c, f)
	c.Flags().StringVar(&key, "session", "", "session key <channel>:<id>")
	c.Flags().BoolVar(&all, "all", false, "clear every session of the agent")
	return c
}

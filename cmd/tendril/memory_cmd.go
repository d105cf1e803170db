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
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/config"
	"github.com/tendrilai/tendril/internal/memory"
	"github.com/tendrilai/tendril/internal/memory/markdown"
	"github.com/tendrilai/tendril/internal/memory/sqlitestore"
	"github.com/tendrilai/tendril/internal/session"
)

// memorySubcommands lets other files (e.g. memory_staging_cmd.go) add
// subcommands to "tendril memory" from their init().
var memorySubcommands []func(*globals) *cobra.Command

// forgetSessions removes the session files of an actor for
// "memory forget --sessions" and returns the removed paths. The default
// deletes <home>/agents/*/sessions/*_<EncodeID(actor)>.jsonl, and for an
// actor "channel:user" also <EncodeID(channel)>_<EncodeID(user)>.jsonl.
var forgetSessions = func(ctx context.Context, cfg *config.Config, actorID string) ([]string, error) {
	patterns := []string{filepath.Join(cfg.Home, "agents", "*", "sessions", "*_"+session.EncodeID(actorID)+".jsonl")}
	if ch, user, ok := strings.Cut(actorID, ":"); ok && ch != "" && user != "" {
		patterns = append(patterns, filepath.Join(cfg.Home, "agents", "*", "sessions", session.EncodeID(ch)+"_"+session.EncodeID(user)+".jsonl"))
	}
	var removed []string
	for _, p := range patterns {
		matches, err := filepath.Glob(p)
		if err != nil {
			return removed, err
		}
		for _, m := range matches {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				return removed, err
			}
			removed = append(removed, m)
		}
	}
	return removed, nil
}

func init() { register(newMemoryCmd) }

// openMemoryStore opens the embedded memory store from the configuration.
func openMemoryStore(g *globals) (*config.Config, *sqlitestore.Store, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlitestore.Open(cfg.Home, memoryStoreOptions(cfg))
	if err != nil {
		return nil, nil, err
	}
	return cfg, st, nil
}

// memoryStoreOptions maps config.Config onto sqlitestore.Options.
func memoryStoreOptions(cfg *config.Config) sqlitestore.Options {
	o := sqlitestore.Options{AgentID: cfg.AgentID, EventExpiryDays: cfg.Memory.EventExpiryDays}
	if len(cfg.Memory.IndexedKeys) > 0 {
		for _, k := range cfg.Memory.IndexedKeys {
			o.IndexedKeys = append(o.IndexedKeys, memory.IndexedKey{Name: k.Name, Type: k.Type})
		}
	}
	return o
}

func newMemoryCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Search, inspect, forget and rebuild long-term memory",
		Long: `Long-term memory lives as Markdown under $TENDRIL_HOME/memory/<actor>/ (episodic daily
logs, semantic.md, procedural.md), the source of truth, with a rebuildable SQLite index
in $TENDRIL_HOME/index/memory.db. Edit the Markdown by hand if you like: changes are
picked up before the next search.`,
	}
	cmd.AddCommand(newMemorySearchCmd(g), newMemoryListCmd(g), newMemoryShowCmd(g), newMemoryForgetCmd(g),
		newMemoryRebuildCmd(g), newMemoryExportCmd(g))
	for _, f := range memorySubcommands {
		cmd.AddCommand(f(g))
	}
	return cmd
}

func actorPath(agent, actor string) string {
	return memory.MustNamespace("/{agentId}/{actorId}/", memory.NamespaceVars{AgentID: agent, ActorID: actor})
}

func parseStatuses(ss []string) ([]memory.Status, error) {
	var out []memory.Status
	for _, s := range ss {
		switch st := memory.Status(strings.ToLower(s)); st {
		case memory.StatusActive, memory.StatusSuperseded, memory.StatusStaged, memory.StatusRejected:
			out = append(out, st)
		default:
			return nil, usagef("unknown status %q (want active, superseded, staged or rejected)", s)
		}
	}
	return out, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newMemorySearchCmd(g *globals) *cobra.Command {
	var actor, agent string
	var filters, statuses []string
	var explain, asJSON bool
	var k int
	var engine string
	cmd := &cobra.Command{
		Use:   "search <query> --actor A",
		Short: "Search one actor's memory (records and past exchanges)",
		Long: `Search ranks the actor's records and past exchanges (episodic events) with BM25F
(stemming, neighbouring turns, speaker and time cues). --explain shows how each score
was made. Filters are key:OP:value on declared indexed keys (default type, section,
plants) or createdAt/updatedAt; OP is one of EQUALS_TO, CONTAINS, EXISTS, NOT_EXISTS,
BEFORE, AFTER, GREATER_THAN, GREATER_THAN_OR_EQUALS, LESS_THAN, LESS_THAN_OR_EQUALS.
Up to 5 filters are AND-ed and applied before ranking.
--engine fts5 ranks with SQLite FTS5 bm25() over the index's full-text table instead
(plain BM25 over the text; the same scope and filters; explain "fts5 bm25=...").

Example:
  tendril memory search "aphids on roses" --actor telegram:12345 --explain
  tendril memory search "aphids on roses" --actor telegram:12345 --engine fts5
  tendril memory search fig --actor u1 --filter plants:CONTAINS:fig --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if actor == "" {
				return usagef("--actor is required")
			}
			eng, err := sqlitestore.ParseEngine(engine)
			if err != nil {
				return usagef("--engine: %v", err)
			}
			q := memory.Query{Text: args[0], TopK: k}
			for _, f := range filters {
				pf, err := memory.ParseFilter(f)
				if err != nil {
					return usageError{err}
				}
				q.Filters = append(q.Filters, pf)
			}
			sts, err := parseStatuses(statuses)
			if err != nil {
				return err
			}
			q.Statuses = sts
			cfg, st, err := openMemoryStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			if agent == "" {
				agent = cfg.AgentID
			}
			q.NamespacePath = actorPath(agent, actor)
			hits, err := st.SearchEngine(c.Context(), q, eng)
			if errors.Is(err, memory.ErrInvalidFilter) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if !explain {
				for i := range hits {
					hits[i].Explain = ""
				}
			}
			if asJSON {
				if hits == nil {
					hits = []memory.Hit{}
				}
				return writeJSON(c.OutOrStdout(), hits)
			}
			printHits(c.OutOrStdout(), hits, explain)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&actor, "actor", "", "actor ID whose memory to search (required)")
	f.StringVar(&agent, "agent", "", "agent ID (default the configured agentId)")
	f.StringArrayVar(&filters, "filter", nil, "metadata filter key:OP:value (repeatable, up to 5)")
	f.StringSliceVar(&statuses, "status", nil, "statuses to include (default active)")
	f.BoolVar(&explain, "explain", false, "explain each score")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.IntVar(&k, "k", 10, "number of results")
	f.StringVar(&engine, "engine", "bm25f", "ranking engine: bm25f (default) or fts5 (SQLite FTS5 bm25)")
	return cmd
}

func printHits(w io.Writer, hits []memory.Hit, explain bool) {
	if len(hits) == 0 {
		fmt.Fprintln(w, "no results")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, h := range hits {
		tag := "[Inferred]"
		if h.Record.Explicit() {
			tag = "[Explicit]"
		}
		fmt.Fprintf(tw, "%d\t%.3f\t%s\t%s\t%s\t%s\n", i+1, h.Score, h.Record.ID, h.Record.Strategy, tag, oneLineText(h.Record.Content, 100))
		if explain && h.Explain != "" {
			fmt.Fprintf(tw, "\t\t\t\t\t  explain: %s\n", h.Explain)
		}
	}
	tw.Flush()
}

func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func newMemoryListCmd(g *globals) *cobra.Command {
	var actor, agent, namespace string
	var statuses []string
	var asJSON, events bool
	cmd := &cobra.Command{
		Use:   "list [--actor A]",
		Short: "List records (or with --events, past exchanges) of one actor or of everyone",
		Long: `List shows stored records in index order. Without --actor it lists the actors that
have memory. --status staged shows items waiting for review.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			sts, err := parseStatuses(statuses)
			if err != nil {
				return err
			}
			cfg, st, err := openMemoryStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			if agent == "" {
				agent = cfg.AgentID
			}
			if actor == "" && namespace == "" {
				actors, err := st.Actors(c.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if actors == nil {
						actors = []string{}
					}
					return writeJSON(c.OutOrStdout(), map[string]any{"actors": actors})
				}
				for _, a := range actors {
					fmt.Fprintln(c.OutOrStdout(), a)
				}
				return nil
			}
			q := memory.Query{NamespacePath: namespace, Statuses: sts}
			if namespace == "" {
				q.NamespacePath = actorPath(agent, actor)
			}
			if !events {
				q.Strategies = []memory.Strategy{memory.StrategyUserPreference, memory.StrategySemantic, memory.StrategySummary, memory.StrategyProcedural, memory.StrategyEpisodic}
			}
			hits, err := st.Search(c.Context(), q)
			if err != nil {
				return err
			}
			var recs []memory.Record
			for _, h := range hits {
				isEvent := h.Record.Metadata["kind"] == "event"
				if isEvent == events {
					recs = append(recs, h.Record)
				}
			}
			if asJSON {
				if recs == nil {
					recs = []memory.Record{}
				}
				return writeJSON(c.OutOrStdout(), recs)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTRATEGY\tSTATUS\tCREATED\tCONTENT")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Strategy, r.Status, r.CreatedAt.Format(time.DateOnly), oneLineText(r.Content, 80))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&actor, "actor", "", "actor ID")
	f.StringVar(&agent, "agent", "", "agent ID (default the configured agentId)")
	f.StringVar(&namespace, "namespace", "", "namespace path to list instead of the actor's")
	f.StringSliceVar(&statuses, "status", nil, "statuses to include (default active)")
	f.BoolVar(&events, "events", false, "list past exchanges (events) instead of records")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newMemoryShowCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <id>",
		Short: "Show one record or event with its metadata and provenance",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			_, st, err := openMemoryStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			r, err := st.Get(c.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), r)
			}
			w := c.OutOrStdout()
			fmt.Fprintf(w, "id:         %s\nnamespace:  %s\nstrategy:   %s\nstatus:     %s\nimportance: %.2f\ncreated:    %s\nupdated:    %s\n",
				r.ID, r.Namespace, r.Strategy, r.Status, r.Importance, r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
			if len(r.Sources) > 0 {
				fmt.Fprintf(w, "sources:    %s\n", strings.Join(r.Sources, ", "))
			}
			if len(r.Metadata) > 0 {
				b, _ := json.Marshal(r.Metadata)
				fmt.Fprintf(w, "metadata:   %s\n", b)
			}
			fmt.Fprintf(w, "\n%s\n", r.Content)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newMemoryForgetCmd(g *globals) *cobra.Command {
	var actor, agent string
	var sessions, asJSON bool
	cmd := &cobra.Command{
		Use:   "forget --actor X [--sessions]",
		Short: "Remove everything remembered about an actor, then prove it with a search",
		Long: `Forget removes the actor's events, records (including staged and superseded ones),
rejections, Markdown files and index entries. With --sessions their session files are
deleted too. A search over every status runs afterwards and must find nothing.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if actor == "" {
				return usagef("--actor is required")
			}
			cfg, st, err := openMemoryStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			if agent == "" {
				agent = cfg.AgentID
			}
			ctx := c.Context()
			if err := st.Forget(ctx, agent, actor); err != nil {
				return err
			}
			if err := forgetActorExtras(ctx, cfg, st, actor); err != nil {
				return err
			}
			var removed []string
			if sessions {
				if removed, err = forgetSessions(ctx, cfg, actor); err != nil {
					return fmt.Errorf("forget sessions of %s: %w", actor, err)
				}
			}
			// Proof: list every status and search broadly; nothing may remain.
			left, err := st.Search(ctx, memory.Query{NamespacePath: actorPath(agent, actor),
				Statuses: []memory.Status{memory.StatusActive, memory.StatusSuperseded, memory.StatusStaged, memory.StatusRejected}})
			if err != nil {
				return err
			}
			evs, err := st.Events(ctx, actor, "")
			if err != nil {
				return err
			}
			remaining := len(left) + len(evs)
			if enc, err := markdown.EncodeActor(actor); err == nil {
				if _, err := os.Stat(filepath.Join(st.MemoryDir(), enc)); err == nil {
					remaining++ // the Markdown directory survived
				}
			}
			if asJSON {
				if removed == nil {
					removed = []string{}
				}
				if err := writeJSON(c.OutOrStdout(), map[string]any{"actor": actor, "remaining": remaining, "sessionFilesRemoved": removed}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(c.OutOrStdout(), "forgot %s; verification search found %d items", actor, remaining)
				if sessions {
					fmt.Fprintf(c.OutOrStdout(), "; removed %d session files", len(removed))
				}
				fmt.Fprintln(c.OutOrStdout())
			}
			if remaining != 0 {
				return fmt.Errorf("forget %s: %d items remain", actor, remaining)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&actor, "actor", "", "actor ID to forget (required)")
	f.StringVar(&agent, "agent", "", "agent ID (default the configured agentId)")
	f.BoolVar(&sessions, "sessions", false, "also delete the actor's session files")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newMemoryRebuildCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild",
		Short: "Recreate the memory index from the Markdown files",
		Long:  `Rebuild drops the SQLite index and re-reads every actor's Markdown; searches give identical results afterwards.`,
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, st, err := openMemoryStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			var bar *progressbar.ProgressBar
			start := time.Now()
			n := 0
			err = st.Rebuild(c.Context(), func(done, total int) {
				n = total
				if bar == nil && isatty.IsTerminal(os.Stderr.Fd()) {
					bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("rebuilding memory index"))
				}
				if bar != nil {
					bar.Set(done)
				}
			})
			if bar != nil {
				bar.Finish()
				fmt.Fprintln(os.Stderr)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "rebuilt memory index from %d actor directories in %s\n", n, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

func newMemoryExportCmd(g *globals) *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "export --format md [--out DIR]",
		Short: "Write every actor's memory as Markdown layer files",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if format != "md" {
				return usagef("--format must be md")
			}
			_, st, err := openMemoryStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			n, err := st.ExportMarkdown(c.Context(), out)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "exported %d files to %s\n", n, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "md", "export format (md)")
	cmd.Flags().StringVar(&out, "out", "memory-export", "output directory")
	return cmd
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/assistant"
	"github.com/tendrilai/tendril/internal/memory"
)

func init() { register(newMemoryCmd) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// syncWriter serialises writes from the chat loop and its delivery reader.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) printf(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, format, a...)
}

// clip makes s one table cell: whitespace runs become one space, and s is
// cut to n runes with "…". Control characters and bidirectional overrides (a U+202E in a tool's
// arguments would reorder the rest of the terminal line) are shown
// escaped, as oneLine shows them.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(oneLine(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func tag(r memory.Record) string {
	if r.Explicit() {
		return "[Explicit]"
	}
	return "[Inferred]"
}

func newMemoryCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Search, inspect, review, forget and rebuild long-term memory",
		Long: `Long-term memory lives as Markdown under $TENDRIL_HOME/memory/<actor>/ (the source of
truth) with a rebuildable SQLite index, or, with TENDRIL_DATABASE_URL, as rows in PostgreSQL
shared by every instance. Every command goes through the running server on this home, so
its caches stay true, or opens the stores itself when none runs (with a database, beside
any running instances: they see the change on their next search).`,
	}
	var actor, agent string
	var statuses []string
	var asJSON bool
	actorFlags := func(c *cobra.Command) {
		c.Flags().StringVar(&actor, "actor", "", "actor ID")
		c.Flags().StringVar(&agent, "agent", "", "agent ID (default the configured agentId)")
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	api := func(c *cobra.Command, method, path string, q url.Values, body, out any, text func(io.Writer) error) error {
		return g.with(c, func(ctx context.Context, cn *conn) error {
			if err := cn.API(ctx, method, path, q, body, out); err != nil {
				return err
			}
			return emit(c, asJSON, out, text)
		})
	}

	var filters []string
	var explain bool
	var k int
	var engine string
	search := &cobra.Command{
		Use:   "search <query> --actor A",
		Short: "Search one actor's memory (records and past exchanges)",
		Long: `Search ranks the actor's records and past exchanges with BM25F, fused with vector
similarity when memory.embedder is set (hybrid); --explain shows how each score was made
(for a hybrid score: the fusion, the BM25F part and the vector cosine and rank); --engine fts5 ranks with SQLite FTS5 bm25() instead. Filters are
key:OP:value on indexed keys (type, section, plants) or createdAt/updatedAt, OP one of
EQUALS_TO, CONTAINS, EXISTS, NOT_EXISTS, BEFORE, AFTER, GREATER_THAN(_OR_EQUALS),
LESS_THAN(_OR_EQUALS); up to 5, AND-ed.`,
		Example: `  tendril memory search "aphids on roses" --actor telegram:12345 --explain`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if actor == "" {
				return usagef("--actor is required")
			}
			if !strings.ContainsFunc(args[0], func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
				// blank or punctuation only, as the server refuses it
				return usagef("search needs words to rank by; `tendril memory list --actor %s` lists the records", actor)
			}
			q := url.Values{"actor": {actor}, "agent": {agent}, "q": {args[0]}, "k": {strconv.Itoa(k)}, "filter": filters,
				"status": statuses, "explain": {strconv.FormatBool(explain)}, "engine": {engine}}
			var hits []memory.Hit
			return api(c, "GET", "/memory/search", q, nil, &hits, func(w io.Writer) error {
				if len(hits) == 0 {
					fmt.Fprintln(w, "no results")
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				for i, h := range hits {
					fmt.Fprintf(tw, "%d\t%.3f\t%s\t%s\t%s\t%s\n", i+1, h.Score, h.Record.ID, h.Record.Strategy, tag(h.Record), clip(h.Record.Content, 100))
					if explain && h.Explain != "" {
						// A hybrid score's parts (fusion, BM25F, vector) one per line.
						for j, part := range strings.Split(h.Explain, " | ") {
							label := "explain:"
							if j > 0 {
								label = "        "
							}
							fmt.Fprintf(tw, "\t\t\t\t\t  %s %s\n", label, part)
						}
					}
				}
				return tw.Flush()
			})
		},
	}
	actorFlags(search)
	search.Flags().StringArrayVar(&filters, "filter", nil, "metadata filter key:OP:value (repeatable, up to 5)")
	search.Flags().StringSliceVar(&statuses, "status", nil, "statuses to include (default active)")
	search.Flags().BoolVar(&explain, "explain", false, "explain each score")
	search.Flags().IntVar(&k, "k", 10, "number of results")
	search.Flags().StringVar(&engine, "engine", "bm25f", "ranking engine: bm25f or fts5")

	var namespace string
	var events bool
	list := &cobra.Command{
		Use:   "list [--actor A]",
		Short: "List records (--events: past exchanges) of one actor, or the actors with memory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if actor == "" && namespace == "" {
				var out struct {
					Actors []string `json:"actors"`
				}
				return api(c, "GET", "/memory/actors", nil, nil, &out, func(w io.Writer) error {
					fmt.Fprintln(w, strings.Join(out.Actors, "\n"))
					return nil
				})
			}
			q := url.Values{"actor": {actor}, "agent": {agent}, "namespace": {namespace}, "status": statuses, "events": {strconv.FormatBool(events)}}
			var recs []memory.Record
			return api(c, "GET", "/memory/records", q, nil, &recs, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTRATEGY\tSTATUS\tCREATED\tCONTENT")
				for _, r := range recs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Strategy, r.Status, r.CreatedAt.Format(time.DateOnly), clip(r.Content, 80))
				}
				return tw.Flush()
			})
		},
	}
	actorFlags(list)
	list.Flags().StringVar(&namespace, "namespace", "", "namespace path to list instead of the actor's")
	list.Flags().StringSliceVar(&statuses, "status", nil, "statuses to include (default active)")
	list.Flags().BoolVar(&events, "events", false, "list past exchanges instead of records")

	show := &cobra.Command{
		Use:   "show <id>",
		Short: "Show one record or event with its metadata and provenance",
		Args:  idArg("record ID"),
		RunE: func(c *cobra.Command, args []string) error {
			var r memory.Record
			return api(c, "GET", "/memory/records/"+url.PathEscape(args[0]), nil, nil, &r, func(w io.Writer) error {
				fmt.Fprintf(w, "id:         %s\nnamespace:  %s\nstrategy:   %s\nstatus:     %s\nimportance: %.2f\ncreated:    %s\nupdated:    %s\n",
					r.ID, r.Namespace, r.Strategy, r.Status, r.Importance, r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
				if len(r.Sources) > 0 {
					fmt.Fprintf(w, "sources:    %s\n", strings.Join(r.Sources, ", "))
				}
				if len(r.Metadata) > 0 {
					b, _ := json.Marshal(r.Metadata)
					fmt.Fprintf(w, "metadata:   %s\n", b)
				}
				_, err := fmt.Fprintf(w, "\n%s\n", r.Content)
				return err
			})
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var sessions bool
	forget := &cobra.Command{
		Use:   "forget --actor X [--sessions]",
		Short: "Remove everything of an actor, then prove it with a search",
		Long: `Forget removes the actor's events, records of every status, staging, rejections, Markdown
and index entries, internal state, paused turns and pending approvals (denied), scheduled jobs,
Telegram updates, pairing and chat→session rows; --sessions also deletes their sessions. On a
running server the very next turn's memory block holds none of it. Without --sessions the
actor's conversation history stays, and the next turn in one of those sessions still sends
that history to the model: use --sessions to forget the conversations too. A search over
every store runs afterwards and must find nothing.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if actor == "" {
				return usagef("--actor is required")
			}
			var rep assistant.ForgetReport
			err := api(c, "POST", "/memory/forget", nil, assistant.ForgetRequest{ActorID: actor, AgentID: agent, Sessions: sessions}, &rep, func(w io.Writer) error {
				if rep.Nothing() {
					fmt.Fprintf(w, "nothing stored for actor %q (IDs are exact; `tendril memory list` shows the actors); verification search found %d items\n", actor, rep.Remaining)
					return nil
				}
				fmt.Fprintf(w, "forgot %s; removed %d record(s), %d event(s), %d job(s), %d session(s); denied %d approval(s); verification search found %d items\n",
					actor, rep.RecordsRemoved, rep.EventsRemoved, rep.JobsRemoved, len(rep.SessionsRemoved), rep.ApprovalsDenied, rep.Remaining)
				return nil
			})
			if err == nil && rep.Remaining != 0 {
				return fmt.Errorf("forget %s: %d items remain", actor, rep.Remaining)
			}
			return err
		},
	}
	actorFlags(forget)
	forget.Flags().BoolVar(&sessions, "sessions", false, "also delete the actor's sessions")

	rebuild := &cobra.Command{
		Use:   "rebuild",
		Short: "Recreate the memory index from the Markdown files",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out struct {
				Actors   int      `json:"actors"`
				Seconds  float64  `json:"seconds"`
				Warnings []string `json:"warnings"`
			}
			return api(c, "POST", "/memory/rebuild", nil, struct{}{}, &out, func(w io.Writer) error {
				for _, wn := range out.Warnings {
					fmt.Fprintf(c.ErrOrStderr(), "warning: %s\n", oneLine(wn))
				}
				if len(out.Warnings) > 0 {
					fmt.Fprintf(w, "%d Markdown warning(s): a skipped entry, or a line that belongs to no entry, is not in the index; fix the file and run rebuild again\n", len(out.Warnings))
				}
				_, err := fmt.Fprintf(w, "rebuilt memory index from %d actor directories in %.2fs\n", out.Actors, out.Seconds)
				return err
			})
		},
	}

	var dir, format string
	export := &cobra.Command{
		Use:   "export [--out DIR]",
		Short: "Write every actor's memory as Markdown layer files",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if format != "md" {
				// the layer files are Markdown; a JSON export is tendril session export or the records API
				return usageError{fmt.Errorf("--format %q: memory export writes Markdown layer files only (md)", format)}
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			var out struct {
				Files int `json:"files"`
			}
			return api(c, "POST", "/memory/export", nil, map[string]string{"dir": abs}, &out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "exported %d files to %s\n", out.Files, abs)
				return err
			})
		},
	}
	export.Flags().StringVar(&dir, "out", "memory-export", "output directory")
	export.Flags().StringVar(&format, "format", "md", "export format: md (the only one)")

	var useLLM bool
	harvest := &cobra.Command{
		Use:   "harvest [--actor A]",
		Short: "Distil episodic memory into long-term records (every actor by default)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var rep assistant.HarvestReport
			return api(c, "POST", "/memory/harvest", nil, assistant.HarvestRequest{ActorID: actor, AgentID: agent, LLM: useLLM}, &rep, func(w io.Writer) error {
				for a, n := range rep.Actors {
					fmt.Fprintf(w, "%s: %d new record(s)\n", a, n)
				}
				if len(rep.Actors) == 0 {
					fmt.Fprintln(w, "no actors with memory")
				}
				return nil
			})
		},
	}
	actorFlags(harvest)
	harvest.Flags().BoolVar(&useLLM, "llm", false, "use the configured model, falling back to rules on bad output")

	cmd.AddCommand(search, list, show, forget, rebuild, export, harvest, newStagingCmd(g))
	return cmd
}

func newStagingCmd(g *globals) *cobra.Command {
	var actor string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "staging",
		Short: "Review memories waiting in staging: list, approve, reject",
		Long: `A candidate memory scoring between the stage (0.4) and store (0.7) thresholds waits here
(SPEC §4.4). Approving makes it active; rejecting remembers its normalised content so the
same thing is never proposed again for that actor.`,
	}
	list := &cobra.Command{
		Use:   "list [--actor A]",
		Short: "List staged memories, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			type staged struct {
				Staged []memory.Record `json:"staged"`
			}
			return call(g, c, asJSON, "GET", "/memory/staging", url.Values{"actor": {actor}}, nil, func(w io.Writer, out staged) error {
				if len(out.Staged) == 0 {
					fmt.Fprintln(w, "nothing staged")
					return nil
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tACTOR\tSTRATEGY\tSCORE\tCREATED\tCONTENT")
				for _, r := range out.Staged {
					_, a, _ := memory.NamespaceActor(r.Namespace)
					fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\n", r.ID, a, r.Strategy, r.Importance, r.CreatedAt.Format(time.DateTime), clip(r.Content, 80))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&actor, "actor", "", "only this actor's staged memories")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	decide := func(verb string) *cobra.Command {
		c := &cobra.Command{
			Use:   verb + " <id>",
			Short: strings.ToUpper(verb[:1]) + verb[1:] + " a staged memory",
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
					return usagef("%s needs the ID of a staged memory (see: tendril memory staging list)", verb)
				}
				return nil
			},
			RunE: func(c *cobra.Command, args []string) error {
				return call(g, c, asJSON, "POST", "/memory/staging/"+url.PathEscape(args[0])+"/"+verb, nil, struct{}{}, func(w io.Writer, _ map[string]any) error {
					_, err := fmt.Fprintf(w, "%s %s\n", map[string]string{"approve": "approved", "reject": "rejected"}[verb], args[0])
					return err
				})
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		return c
	}
	cmd.AddCommand(list, decide("approve"), decide("reject"))
	return cmd
}

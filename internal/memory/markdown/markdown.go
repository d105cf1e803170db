// Package markdown reads and writes Tendril's memory layers as Markdown, the
// source of truth of the embedded store (SPEC §4.5):
//
//	memory/<actor>/episodic/YYYY-MM-DD.md  daily log: past exchanges (events),
//	                                       session summaries, episodic notes
//	memory/<actor>/semantic.md             preferences and facts
//	memory/<actor>/procedural.md           standing instructions
//	memory/<actor>/rejected.md             normalised hashes of rejected items
//
// Each entry is a "## " heading, one HTML comment holding its metadata as
// JSON (invisible when rendered) and the text:
//
//	## Prefers organic fertiliser
//	<!-- tendril:record {"id":"mem_…","namespace":"/main/u1/long_term/",…} -->
//	I only use organic fertiliser.
//
// A person may edit the text, delete entries or add a "## " section with no
// comment; such a section becomes an active record of the file's layer
// with an ID derived from its content.
//
// A record's text is its lines after the metadata, up to the first blank
// line after them: a blank line inside a record's text is written as a
// lone "\" (as a text line starting with "#", "\" or "<!-- tendril:" is
// written with a "\" before it in every entry), so a text may hold
// paragraphs and still round-trip. Lines after that blank line and before
// the next "## " heading, like lines before the first heading other than
// the file header (and, in rejected.md, its "- <hash>" lines), belong to
// no entry: Parse reports them in Warnings by file and line and leaves
// them out of every record, so that notes appended by hand never silently
// become part of the record above them. Records written before this rule
// carry no "format" in their metadata, and their text runs to the next
// heading, blank lines included, as it always did; so does a hand-written
// section's, and so does an event's: the daily logs are transcripts, whose
// messages have paragraphs of their own, and stay plain Markdown.
//
// Record files are append-only between compactions: a record that changes
// (a merge, an update, a supersede) is written again as a new entry with
// the same ID at the end of its file, and the last entry of an ID in a
// file is the record (last one wins); earlier entries of that ID are
// stale. A last entry with an emptied text deletes the record. So a hand
// edit takes effect only in the last entry of an ID; an edit of an
// earlier, stale entry is ignored, and deleting the last entry brings the
// previous one back (empty its text instead, or delete every entry of
// the ID). The embedded store rewrites a file whole (compacts it: one
// entry per record, as Render writes it) when most of it is stale and on
// `tendril memory rebuild`; Render (export, any backend) always writes the
// compact form.
//
// A write torn by a crash can only damage the final entry, and every
// earlier entry (so every earlier version of the record being rewritten)
// still parses: a final entry cut inside its heading or metadata is
// skipped with a warning, one cut right after its metadata (no text, no
// blank line after it: every written entry ends with one) is skipped
// rather than read as a deletion, and one cut inside its text keeps the
// text up to the cut. A heading cut after "## " reads as a hand-written
// title.
package markdown

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tendrilai/tendril/internal/memory"
)

// Layer names.
const (
	LayerEpisodic   = "episodic"
	LayerSemantic   = "semantic"
	LayerProcedural = "procedural"
)

// LayerOf returns the layer a record of strategy s lives in.
func LayerOf(s memory.Strategy) string {
	switch s {
	case memory.StrategyProcedural:
		return LayerProcedural
	case memory.StrategySummary, memory.StrategyEpisodic:
		return LayerEpisodic
	}
	return LayerSemantic
}

// maxEncoded bounds an encoded actor directory name in bytes.
const maxEncoded = 120

// ErrBadActor is returned for an empty actor ID.
var ErrBadActor = errors.New("markdown: empty actor id")

// EncodeActor maps an actor ID to one safe directory name: ASCII letters,
// digits, "-", "_" and non-leading "." are kept; every other byte is
// %XX-encoded, so "/", "..", NUL and Unicode look-alikes can never escape
// or collide. Names longer than 120 bytes are cut and suffixed with a hash.
func EncodeActor(actor string) (string, error) {
	if actor == "" {
		return "", ErrBadActor
	}
	var b strings.Builder
	for i := 0; i < len(actor); i++ {
		c := actor[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if len(s) > maxEncoded {
		sum := sha256.Sum256([]byte(actor))
		s = s[:maxEncoded-17] + "~" + hex.EncodeToString(sum[:8])
	}
	return s, nil
}

// ActorDir is <memoryDir>/<encoded actor>.
func ActorDir(memoryDir, actor string) (string, error) {
	enc, err := EncodeActor(actor)
	if err != nil {
		return "", err
	}
	return filepath.Join(memoryDir, enc), nil
}

// RecordFile returns the file, relative to the actor directory, that holds
// rec.
func RecordFile(rec memory.Record) string {
	switch LayerOf(rec.Strategy) {
	case LayerProcedural:
		return "procedural.md"
	case LayerEpisodic:
		return filepath.Join("episodic", rec.CreatedAt.UTC().Format("2006-01-02")+".md")
	}
	return "semantic.md"
}

// EventFile returns the daily log, relative to the actor directory, that
// holds ev.
func EventFile(ev memory.Event) string {
	return filepath.Join("episodic", ev.Timestamp.UTC().Format("2006-01-02")+".md")
}

// RejectedFile is the file of rejected-content hashes.
const RejectedFile = "rejected.md"

type actorMeta struct {
	ActorID string `json:"actorId"`
}

type eventMeta struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionId,omitempty"`
	Role      string         `json:"role,omitempty"`
	Timestamp time.Time      `json:"timestamp"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

var (
	knownStatus   = map[memory.Status]bool{memory.StatusActive: true, memory.StatusStaged: true, memory.StatusSuperseded: true, memory.StatusRejected: true}
	knownStrategy = map[memory.Strategy]bool{memory.StrategyUserPreference: true, memory.StrategySemantic: true, memory.StrategySummary: true,
		memory.StrategyProcedural: true, memory.StrategyEpisodic: true}
)

type recordMeta struct {
	ID         string          `json:"id"`
	Namespace  string          `json:"namespace"`
	Strategy   memory.Strategy `json:"strategy"`
	Status     memory.Status   `json:"status"`
	Importance float64         `json:"importance"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
	Sources    []string        `json:"sources,omitempty"`
	Metadata   map[string]any  `json:"metadata,omitempty"`
	Format     int             `json:"format,omitempty"` // formatBlankEnds, or 0 for an older entry
}

// formatBlankEnds marks an entry whose text ends at its first blank line
// (its own blank lines are written "\"), so that lines appended after it
// by hand are told apart from its text. Entries without it (written
// before) take every line up to the next heading.
const formatBlankEnds = 2

const (
	commentActor  = "<!-- tendril:actor "
	commentEvent  = "<!-- tendril:event "
	commentRecord = "<!-- tendril:record "
	commentEnd    = " -->"
)

// EncodeMetadata writes time values as {"$time": RFC 3339} so they survive
// the round trip typed.
func EncodeMetadata(md map[string]any) map[string]any {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]any, len(md))
	for k, v := range md {
		if t, ok := v.(time.Time); ok {
			out[k] = map[string]string{"$time": t.UTC().Format(time.RFC3339Nano)}
			continue
		}
		out[k] = v
	}
	return out
}

// DecodeMetadata reverses EncodeMetadata after a JSON round trip.
func DecodeMetadata(md map[string]any) map[string]any {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]any, len(md))
	for k, v := range md {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["$time"].(string); ok {
				if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
					out[k] = t
					continue
				}
			}
			b, _ := json.Marshal(x)
			out[k] = string(b)
		case []any:
			ss := make([]string, 0, len(x))
			for _, e := range x {
				if s, ok := e.(string); ok {
					ss = append(ss, s)
				} else {
					ss = append(ss, fmt.Sprint(e))
				}
			}
			out[k] = ss
		case bool:
			out[k] = fmt.Sprint(x)
		default:
			out[k] = x
		}
	}
	return out
}

// comment renders one metadata comment line; "-->" inside JSON strings is
// escaped by encoding/json's HTML escaping of ">".
func comment(prefix string, v any) string {
	b, _ := json.Marshal(v) // HTML-escapes <, > and & so "-->" cannot appear
	return prefix + string(b) + commentEnd
}

// escapeBody protects lines that would read as structure: a heading, a
// metadata comment, a leading backslash and, with blankEnds (a record), a
// blank line before more text (a blank line ends a record's text;
// trailing ones are trimmed on parse anyway, so they stay as they are).
func escapeBody(text string, blankEnds bool) string {
	lines := strings.Split(text, "\n")
	last := len(lines) - 1 // the last line with text
	for last >= 0 && isBlank(lines[last]) {
		last--
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "\\") || strings.HasPrefix(l, "<!-- tendril:") || (blankEnds && i < last && isBlank(l)) {
			lines[i] = "\\" + l
		}
	}
	return strings.Join(lines, "\n")
}

// isBlank reports a line that is empty or only white space: Markdown's
// paragraph break.
func isBlank(l string) bool { return strings.TrimSpace(l) == "" }

func unescapeLine(l string) string {
	if strings.HasPrefix(l, "\\") {
		return l[1:]
	}
	return l
}

// heading makes a one-line title from text.
func heading(text string) string {
	line := strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
	if utf8.RuneCountInString(line) > 72 {
		r := []rune(line)
		line = string(r[:72]) + "…"
	}
	if line == "" {
		line = "(empty)"
	}
	return line
}

// FileHeader is the first lines of a layer file for actor.
func FileHeader(actor, title string) []byte {
	return []byte(comment(commentActor, actorMeta{ActorID: actor}) + "\n# " + title + "\n\n")
}

// FormatEvent renders one event entry.
func FormatEvent(ev memory.Event) []byte {
	var b bytes.Buffer
	speaker := ev.Role
	if s, ok := ev.Metadata["speaker"].(string); ok && s != "" {
		speaker = s
	}
	fmt.Fprintf(&b, "## %s · %s · session %s\n", ev.Timestamp.UTC().Format("2006-01-02 15:04:05"), oneLine(speaker), oneLine(ev.SessionID))
	b.WriteString(comment(commentEvent, eventMeta{ID: ev.ID, SessionID: ev.SessionID, Role: ev.Role, Timestamp: ev.Timestamp.UTC(), Metadata: EncodeMetadata(ev.Metadata)}))
	b.WriteString("\n")
	b.WriteString(escapeBody(ev.Text, false))
	b.WriteString("\n\n")
	return b.Bytes()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if s == "" {
		return "-"
	}
	return s
}

// FormatRecord renders one record entry.
func FormatRecord(rec memory.Record) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## %s\n", heading(rec.Content))
	b.WriteString(comment(commentRecord, recordMeta{
		ID: rec.ID, Namespace: rec.Namespace, Strategy: rec.Strategy, Status: rec.Status, Importance: rec.Importance,
		CreatedAt: rec.CreatedAt.UTC(), UpdatedAt: rec.UpdatedAt.UTC(), Sources: rec.Sources, Metadata: EncodeMetadata(rec.Metadata),
		Format: formatBlankEnds,
	}))
	b.WriteString("\n")
	b.WriteString(escapeBody(rec.Content, true))
	b.WriteString("\n\n")
	return b.Bytes()
}

// Parsed is the content of one layer file.
type Parsed struct {
	ActorID  string
	Events   []memory.Event
	Records  []memory.Record
	Hashes   []string // rejected.md only
	Warnings []string // entries skipped as unreadable (e.g. a torn last write)
	// Stale counts the record entries overridden by a later entry of the
	// same ID (last one wins), and StaleBytes their size in bytes.
	Stale      int
	StaleBytes int64
}

// Defaults completes hand-written entries, which carry no metadata.
type Defaults struct {
	ActorID   string
	Namespace string          // for hand-written records
	Strategy  memory.Strategy // the file's layer
	Time      time.Time       // createdAt of hand-written records (the file's mtime)
	File      string          // relative path, mixed into hand-written IDs
}

// Parse reads one layer file. It never fails on content: unreadable
// entries are skipped and reported in Warnings, and so are lines that
// belong to no entry (see the package comment). Records come in the order
// of their last entry; of several entries with one ID only the last
// counts (an emptied last entry deletes the record) and the others are
// counted in Stale and StaleBytes.
func Parse(data []byte, d Defaults) Parsed {
	p := Parsed{ActorID: d.ActorID}
	type entry struct {
		title   string
		kind    string // "event", "record", "hand"
		meta    string
		body    []string // as written (escaped)
		bodyAt  []int    // the line number of each body line
		lineNum int
		size    int64 // bytes from the heading to the next heading
	}
	// textOf is an entry's text: with blankEnds (formatBlankEnds) the lines
	// from its first line with text up to the next blank line, the rest
	// reported as belonging to no entry; else every line.
	textOf := func(e *entry, blankEnds bool, what string) string {
		lines := e.body
		if blankEnds {
			start := slices.IndexFunc(lines, func(l string) bool { return !isBlank(l) })
			if start < 0 {
				start = len(lines)
			}
			if i := slices.IndexFunc(lines[start:], isBlank); i >= 0 {
				end := start + i
				lines = lines[:end]
				p.Warnings = append(p.Warnings, strays(d.File, e.body[end:], e.bodyAt[end:], "after the end of "+what+
					` (a blank line ends an entry's text; write a blank line inside it as a lone "\")`)...)
			}
		}
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = unescapeLine(l)
		}
		return strings.TrimSpace(strings.Join(out, "\n"))
	}
	var entries []*entry
	var cur *entry
	var pre []string // lines before the first heading that are no header
	var preAt []int
	rejected := filepath.Base(d.File) == RejectedFile
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	line := 0
	final := -1 // the last line when it has no newline: where a torn write ends
	if len(data) > 0 && data[len(data)-1] != '\n' {
		final = bytes.Count(data, []byte("\n")) + 1
	}
	for sc.Scan() {
		line++
		n := int64(len(sc.Bytes())) + 1
		l := strings.TrimRight(sc.Text(), "\r")
		if cur != nil && !strings.HasPrefix(l, "## ") {
			cur.size += n
		}
		if (l == "#" || l == "##") && line == final {
			// The start of a heading torn off by a crash: not text of the
			// entry before.
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s:%d: torn heading skipped", d.File, line))
			continue
		}
		switch {
		case strings.HasPrefix(l, commentActor) && strings.HasSuffix(l, commentEnd):
			var m actorMeta
			if json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(l, commentActor), commentEnd)), &m) == nil && m.ActorID != "" {
				p.ActorID = m.ActorID
			}
			continue
		case strings.HasPrefix(l, "## "):
			cur = &entry{title: strings.TrimSpace(l[3:]), kind: "hand", lineNum: line, size: n}
			entries = append(entries, cur)
			continue
		case cur != nil && cur.kind == "hand" && len(cur.body) == 0 && (strings.HasPrefix(l, commentEvent) || strings.HasPrefix(l, commentRecord)):
			if strings.HasPrefix(l, commentEvent) {
				cur.kind = "event"
				cur.meta = strings.TrimPrefix(l, commentEvent)
			} else {
				cur.kind = "record"
				cur.meta = strings.TrimPrefix(l, commentRecord)
			}
			if !strings.HasSuffix(cur.meta, commentEnd) {
				cur.kind = "bad"
			}
			cur.meta = strings.TrimSuffix(cur.meta, commentEnd)
			continue
		case cur == nil:
			if h, ok := strings.CutPrefix(l, "- "); ok && rejected {
				if h = strings.TrimSpace(h); h != "" {
					p.Hashes = append(p.Hashes, h)
				}
				continue
			}
			if !strings.HasPrefix(l, "# ") { // the file's title, or text
				pre, preAt = append(pre, l), append(preAt, line)
			}
			continue
		}
		cur.body, cur.bodyAt = append(cur.body, l), append(cur.bodyAt, line)
	}
	if err := sc.Err(); err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s: %v", d.File, err))
	}
	where := `before the first "## " heading (start a "## " section to make a record of it)`
	if rejected {
		where = `before the first "## " heading and not a "- <hash>" line`
	}
	p.Warnings = append(p.Warnings, strays(d.File, pre, preAt, where)...)
	// Records are collected with the index of their entry; an ID's later
	// entry replaces (or, emptied, deletes) the earlier one.
	type found struct {
		rec  memory.Record
		size int64
		gone bool // emptied by a person: deleted
	}
	var recs []found
	last := map[string]int{} // record ID -> index in recs
	addRecord := func(f found) {
		if i, ok := last[f.rec.ID]; ok {
			p.Stale++
			p.StaleBytes += recs[i].size
			recs[i].gone = true
			recs[i].size = 0
		}
		last[f.rec.ID] = len(recs)
		recs = append(recs, f)
	}
	for ei, e := range entries {
		switch e.kind {
		case "event":
			var m eventMeta
			if err := json.Unmarshal([]byte(e.meta), &m); err != nil || m.ID == "" {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s:%d: unreadable event metadata, entry skipped", d.File, e.lineNum))
				continue
			}
			// An event's text runs to the next heading: the daily logs are
			// transcripts, whose messages have paragraphs of their own.
			text := textOf(e, false, "")
			p.Events = append(p.Events, memory.Event{ID: m.ID, ActorID: p.ActorID, SessionID: m.SessionID, Role: m.Role,
				Text: text, Timestamp: m.Timestamp.UTC(), Metadata: DecodeMetadata(m.Metadata)})
		case "record":
			var m recordMeta
			if err := json.Unmarshal([]byte(e.meta), &m); err != nil || m.ID == "" {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s:%d: unreadable record metadata, entry skipped", d.File, e.lineNum))
				continue
			}
			text := textOf(e, m.Format >= formatBlankEnds, "record "+m.ID)
			// A hand edit's "Active" or " semantic" means the known value;
			// an unknown one would index a record no listing shows.
			m.Status = memory.Status(strings.ToLower(strings.TrimSpace(string(m.Status))))
			m.Strategy = memory.Strategy(strings.ToLower(strings.TrimSpace(string(m.Strategy))))
			if m.Status != "" && !knownStatus[m.Status] {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s:%d: unknown status %q (want active, staged, superseded or rejected), entry skipped", d.File, e.lineNum, m.Status))
				continue
			}
			if m.Strategy != "" && !knownStrategy[m.Strategy] {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s:%d: unknown strategy %q, entry skipped", d.File, e.lineNum, m.Strategy))
				continue
			}
			if text == "" && ei == len(entries)-1 && !bytes.HasSuffix(data, []byte("\n\n")) {
				// Torn after its metadata (every entry written ends in a
				// blank line): not a deletion.
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s:%d: torn record entry skipped", d.File, e.lineNum))
				continue
			}
			if text == "" { // a person emptied it: deleted, earlier entries of the ID too
				addRecord(found{rec: memory.Record{ID: m.ID}, size: e.size, gone: true})
				continue
			}
			addRecord(found{rec: memory.Record{ID: m.ID, Namespace: m.Namespace, Strategy: m.Strategy, Content: text,
				Metadata: DecodeMetadata(m.Metadata), CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC(), Sources: m.Sources,
				Importance: m.Importance, Status: m.Status}, size: e.size})
		case "hand":
			text := textOf(e, false, "")
			if text == "" {
				text = e.title
			}
			if text == "" || d.Namespace == "" || filepath.Base(d.File) == RejectedFile {
				continue
			}
			sum := sha256.Sum256([]byte(d.File + "\x00" + e.title + "\x00" + text))
			addRecord(found{rec: memory.Record{ID: "md_" + hex.EncodeToString(sum[:10]), Namespace: d.Namespace,
				Strategy: d.Strategy, Content: text, CreatedAt: d.Time.UTC(), UpdatedAt: d.Time.UTC(), Importance: 1,
				Status: memory.StatusActive, Metadata: map[string]any{"source": "markdown"}}, size: e.size})
		default:
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s:%d: torn or unreadable entry skipped", d.File, e.lineNum))
		}
	}
	for _, f := range recs {
		if !f.gone {
			p.Records = append(p.Records, f.rec)
		}
	}
	return p
}

// strays reports lines (numbered at) that belong to no entry, where
// says where they are: one warning per run of them (blank lines end a
// run and are not reported), naming the file and the run's first line.
func strays(file string, lines []string, at []int, where string) []string {
	var out []string
	for i := 0; i < len(lines); {
		if isBlank(lines[i]) {
			i++
			continue
		}
		j := i
		for j < len(lines) && !isBlank(lines[j]) && (j == i || at[j] == at[j-1]+1) {
			j++
		}
		what := "line ignored, it belongs"
		if n := j - i; n > 1 {
			what = fmt.Sprintf("%d lines (to line %d) ignored, they belong", n, at[j-1])
		}
		out = append(out, fmt.Sprintf("%s:%d: %s to no entry: text %s", file, at[i], what, where))
		i = j
	}
	return out
}

// SortEvents orders events by timestamp, then ID.
func SortEvents(evs []memory.Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if !evs[i].Timestamp.Equal(evs[j].Timestamp) {
			return evs[i].Timestamp.Before(evs[j].Timestamp)
		}
		return evs[i].ID < evs[j].ID
	})
}

// SortRecords orders records by createdAt, then ID.
func SortRecords(recs []memory.Record) {
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].CreatedAt.Equal(recs[j].CreatedAt) {
			return recs[i].CreatedAt.Before(recs[j].CreatedAt)
		}
		return recs[i].ID < recs[j].ID
	})
}

// Render produces the full content of every layer file of one actor, keyed
// by path relative to the actor directory. Used to rewrite files and by
// `tendril memory export --format md` for any backend.
func Render(actor string, records []memory.Record, events []memory.Event, rejected []string) map[string][]byte {
	out := map[string][]byte{}
	add := func(file, title string, b []byte) {
		if _, ok := out[file]; !ok {
			out[file] = FileHeader(actor, title)
		}
		out[file] = append(out[file], b...)
	}
	recs := append([]memory.Record(nil), records...)
	SortRecords(recs)
	evs := append([]memory.Event(nil), events...)
	SortEvents(evs)
	for _, r := range recs {
		f := RecordFile(r)
		add(f, Title(f), FormatRecord(r))
	}
	for _, e := range evs {
		f := EventFile(e)
		add(f, Title(f), FormatEvent(e))
	}
	if len(rejected) > 0 {
		hs := append([]string(nil), rejected...)
		sort.Strings(hs)
		out[RejectedFile] = FileHeader(actor, Title(RejectedFile))
		for _, h := range hs {
			out[RejectedFile] = append(out[RejectedFile], []byte("- "+h+"\n")...)
		}
	}
	return out
}

// Title is the "# " title of a layer file.
func Title(file string) string {
	switch {
	case file == "semantic.md":
		return "Semantic memory"
	case file == "procedural.md":
		return "Procedural memory"
	case file == RejectedFile:
		return "Rejected memory (normalised content hashes, never proposed again)"
	}
	return "Episodic log " + strings.TrimSuffix(filepath.Base(file), ".md")
}

// WriteFileAtomic writes data to path through a temporary file and rename,
// so a crash leaves either the old or the new file.
func WriteFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// AppendFile appends data to path in one write, creating the file with
// header when it does not exist.
func AppendFile(path string, header, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil && st.Size() == 0 {
		data = append(append([]byte(nil), header...), data...)
	} else if err == nil {
		// A torn earlier write may have left no final newline: start clean.
		last := make([]byte, 1)
		if _, rerr := f.ReadAt(last, st.Size()-1); rerr == nil && last[0] != '\n' {
			data = append([]byte("\n\n"), data...)
		}
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

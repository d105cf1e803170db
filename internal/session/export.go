package session

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Export formats.
const (
	FormatJSON  = "json"  // one document {"key","leaf","nodes"}
	FormatJSONL = "jsonl" // one node per line, append order (the JSONL store's own node format)
	FormatMD    = "md"    // Markdown transcript of the active branch
)

// ExportDoc is the FormatJSON document.
type ExportDoc struct {
	Key      Key      `json:"key"`
	Leaf     string   `json:"leaf"`
	Nodes    []Node   `json:"nodes"`
	Branches []Branch `json:"branches"`
}

// Export writes the session key to w as FormatJSON (every node and the
// branches), FormatJSONL (every node) or FormatMD (the active branch,
// root first, as a readable transcript). ErrNotFound for an unknown
// session; an unknown format is an error naming the formats.
func Export(ctx context.Context, st Store, key Key, format string, w io.Writer) error {
	if format != FormatJSON && format != FormatJSONL && format != FormatMD {
		return fmt.Errorf("export %s: unknown format %q (want json, jsonl or md)", key, format)
	}
	nodes, err := st.Nodes(ctx, key)
	if err != nil {
		return fmt.Errorf("export %s: %w", key, err)
	}
	leaf, err := st.Leaf(ctx, key)
	if err != nil {
		return fmt.Errorf("export %s: %w", key, err)
	}
	bw := bufio.NewWriter(w)
	switch format {
	case FormatJSON:
		if nodes == nil {
			nodes = []Node{}
		}
		enc := json.NewEncoder(bw)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ExportDoc{Key: key, Leaf: leaf, Nodes: nodes, Branches: branchesOf(nodes, leaf)}); err != nil {
			return fmt.Errorf("export %s: %w", key, err)
		}
	case FormatJSONL:
		enc := json.NewEncoder(bw)
		for _, n := range nodes {
			if err := enc.Encode(n); err != nil {
				return fmt.Errorf("export %s: %w", key, err)
			}
		}
	case FormatMD:
		path, err := st.Path(ctx, key, leaf, 0)
		if err != nil && leaf != "" {
			return fmt.Errorf("export %s: %w", key, err)
		}
		fmt.Fprintf(bw, "# Session %s (agent %s)\n\n", key, key.AgentID)
		fmt.Fprintf(bw, "%s, %s; active branch below.\n\n", plural(len(nodes), "node"), plural(len(branchesOf(nodes, leaf)), "branch"))
		for _, n := range path {
			fmt.Fprintf(bw, "## %s · %s · `%s`\n\n", n.Role, unixTime(n.Timestamp), n.ID)
			text := escapeHeadings(n.PlainText())
			if n.IsCompaction() {
				text = "> " + strings.ReplaceAll(text, "\n", "\n> ")
			}
			fmt.Fprintf(bw, "%s\n\n", text)
		}
	}
	return bw.Flush()
}

// escapeHeadings backslash-escapes the "#" that opens an ATX heading
// (CommonMark §4.2: up to three spaces, then #) on any line of text, so a
// message cannot write a "## assistant · … · `msg_…`" line that reads as
// a node of the transcript (CommonMark §2.4: \# is a literal #).
func escapeHeadings(text string) string {
	if !strings.Contains(text, "#") {
		return text
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		j := len(l) - len(strings.TrimLeft(l, " "))
		if j <= 3 && strings.HasPrefix(l[j:], "#") {
			lines[i] = l[:j] + "\\" + l[j:]
		}
	}
	return strings.Join(lines, "\n")
}

// plural is "1 node", "2 nodes", "1 branch", "3 branches".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

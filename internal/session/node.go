package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Errors a Store or helper returns for bad input. Callers branch on them with
// errors.Is; ErrNotFound is declared in session.go.
var (
	// ErrInvalidKey reports an empty or oversize agent, channel or session ID.
	ErrInvalidKey = errors.New("session: invalid key")
	// ErrInvalidNode reports a node without ID or role, or with an unknown role.
	ErrInvalidNode = errors.New("session: invalid node")
	// ErrDuplicateNode reports an Append of an ID the session already holds.
	ErrDuplicateNode = errors.New("session: duplicate node id")
)

// MaxIDLen bounds each Key field in bytes. Longer IDs are refused with
// ErrInvalidKey; IDs up to this length are stored (the JSONL store shortens
// long ones with a hash suffix, see EncodeID).
const MaxIDLen = 64 << 10

// Block types.
const (
	BlockText       = "text"
	BlockImage      = "image"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// MetaType is the metadata key that marks special nodes; MetaTypeCompaction
// its value on compaction (summary) nodes.
const (
	MetaType           = "type"
	MetaTypeCompaction = "compaction"
)

// NewNodeID returns a fresh node ID "msg_<ULID>" (26 Crockford base32
// characters, time-ordered, https://github.com/ulid/spec). Safe for
// concurrent use.
func NewNodeID() string { return "msg_" + ulid.Make().String() }

// String renders the key as "<channel>:<id>", the CLI key syntax. The agent
// is not part of it.
func (k Key) String() string { return k.Channel + ":" + k.ID }

// ParseKey parses the CLI key syntax "<channel>:<id>": the channel is
// everything before the first ':' (so a channel never contains ':') and the
// ID everything after it (it may contain ':'). agentID fills Key.AgentID.
func ParseKey(agentID, s string) (Key, error) {
	ch, id, ok := strings.Cut(s, ":")
	k := Key{AgentID: agentID, Channel: ch, ID: id}
	if !ok {
		return k, fmt.Errorf("%w: %q is not <channel>:<id>", ErrInvalidKey, s)
	}
	return k, k.Validate()
}

// Validate checks that AgentID, Channel and ID are non-empty, at most
// MaxIDLen bytes, and that Channel has no ':'. Any other bytes (NUL, '/',
// "..", non-UTF-8) are allowed: stores encode them (EncodeID).
func (k Key) Validate() error {
	for _, f := range []struct{ name, v string }{{"agent", k.AgentID}, {"channel", k.Channel}, {"id", k.ID}} {
		if f.v == "" {
			return fmt.Errorf("%w: empty %s", ErrInvalidKey, f.name)
		}
		if len(f.v) > MaxIDLen {
			return fmt.Errorf("%w: %s is %d bytes (max %d)", ErrInvalidKey, f.name, len(f.v), MaxIDLen)
		}
	}
	if strings.ContainsRune(k.Channel, ':') {
		return fmt.Errorf("%w: channel %q contains ':'", ErrInvalidKey, k.Channel)
	}
	return nil
}

// wireNode is Node's JSON shape. Field order matters: the JSONL store's fast
// loader expects a line to start with {"id":...,"parentId":...}.
type wireNode struct {
	ID        string          `json:"id"`
	ParentID  *string         `json:"parentId"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Timestamp int64           `json:"timestamp"`
	Channel   string          `json:"channel,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

// MarshalJSON writes the SPEC §3 node shape: content is the Text string, or
// the Blocks array when Blocks is non-empty (a non-empty Text then becomes a
// leading text block); parentId is null for a root.
func (n Node) MarshalJSON() ([]byte, error) {
	w := wireNode{ID: n.ID, Role: n.Role, Timestamp: n.Timestamp, Channel: n.Channel, Metadata: n.Metadata}
	if n.ParentID != "" {
		p := n.ParentID
		w.ParentID = &p
	}
	var err error
	if len(n.Blocks) > 0 {
		bl := n.Blocks
		if n.Text != "" {
			bl = append([]Block{{Type: BlockText, Text: n.Text}}, n.Blocks...)
		}
		w.Content, err = json.Marshal(bl)
	} else {
		w.Content, err = json.Marshal(n.Text)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the SPEC §3 node shape; content may be a string, an
// array of blocks, null or absent.
func (n *Node) UnmarshalJSON(b []byte) error {
	var w wireNode
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*n = Node{ID: w.ID, Role: w.Role, Timestamp: w.Timestamp, Channel: w.Channel, Metadata: w.Metadata}
	if w.ParentID != nil {
		n.ParentID = *w.ParentID
	}
	c := bytes.TrimSpace(w.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		if err := json.Unmarshal(c, &n.Text); err != nil {
			return fmt.Errorf("node content: %w", err)
		}
	case c[0] == '[':
		if err := json.Unmarshal(c, &n.Blocks); err != nil {
			return fmt.Errorf("node content: %w", err)
		}
	default:
		return fmt.Errorf("node content must be a string or an array of blocks")
	}
	return nil
}

// IsCompaction reports whether n is a compaction node (metadata.type =
// "compaction").
func (n Node) IsCompaction() bool {
	t, _ := n.Metadata[MetaType].(string)
	return t == MetaTypeCompaction
}

// PlainText returns the node's text: Text plus the text of its text blocks,
// joined by newlines. Tool and image blocks are rendered as short markers.
func (n Node) PlainText() string {
	if len(n.Blocks) == 0 {
		return n.Text
	}
	var parts []string
	if n.Text != "" {
		parts = append(parts, n.Text)
	}
	for _, b := range n.Blocks {
		switch b.Type {
		case BlockText:
			parts = append(parts, b.Text)
		case BlockImage:
			parts = append(parts, "[image "+b.ImageRef+"]")
		case BlockToolUse:
			parts = append(parts, "[tool_use "+b.Name+" "+string(b.Input)+"]")
		case BlockToolResult:
			parts = append(parts, "[tool_result "+b.Text+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// toolUseIDs returns the IDs of n's tool_use blocks.
func (n Node) toolUseIDs() []string {
	var ids []string
	for _, b := range n.Blocks {
		if b.Type == BlockToolUse {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// isToolResultOnly reports whether n carries tool_result blocks and nothing
// else (the shape of the message that answers a tool_use).
func (n Node) isToolResultOnly() bool {
	if n.Text != "" || len(n.Blocks) == 0 {
		return false
	}
	for _, b := range n.Blocks {
		if b.Type != BlockToolResult {
			return false
		}
	}
	return true
}

var validRoles = map[string]bool{RoleUser: true, RoleAssistant: true, RoleSystem: true, RoleTool: true}

// PrepareAppend validates nodes for Append on key and fills defaults: a
// zero Timestamp becomes now (unix seconds) and an empty Channel becomes
// key.Channel. It returns ErrInvalidKey, or ErrInvalidNode for a node
// without ID, with an unknown role, a self-parent, or an ID that is not
// valid UTF-8 or over 256 bytes. Backends call it first; it does not check
// parents or duplicates against stored nodes.
func PrepareAppend(key Key, nodes []Node, now time.Time) ([]Node, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		switch {
		case n.ID == "":
			return nil, fmt.Errorf("%w: node %d has no id", ErrInvalidNode, i)
		case len(n.ID) > 256 || !utf8.ValidString(n.ID):
			return nil, fmt.Errorf("%w: node id %.40q is not valid UTF-8 of at most 256 bytes", ErrInvalidNode, n.ID)
		case !validRoles[n.Role]:
			return nil, fmt.Errorf("%w: node %s has role %q", ErrInvalidNode, n.ID, n.Role)
		case n.ParentID == n.ID:
			return nil, fmt.Errorf("%w: node %s is its own parent", ErrInvalidNode, n.ID)
		}
		if n.Timestamp == 0 {
			n.Timestamp = now.Unix()
		}
		if n.Channel == "" {
			n.Channel = key.Channel
		}
		out[i] = n
	}
	return out, nil
}

// Package session keeps conversations as trees of message nodes (OpenClaw
// semantics, SPEC §3): every node points at its parent, a session has one
// persisted active leaf, and context for the model is the path from the
// active leaf back toward the root.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Roles of a node.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleTool      = "tool"
)

// Block is one typed content block of a node: "text", "image" (a reference,
// never the bytes), "tool_use" or "tool_result".
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ImageRef  string          `json:"imageRef,omitempty"`  // e.g. "sha256:<hex>" or a file path under $TENDRIL_HOME/media
	MediaType string          `json:"mediaType,omitempty"` // for images
	ID        string          `json:"id,omitempty"`        // tool_use id
	Name      string          `json:"name,omitempty"`      // tool name
	Input     json.RawMessage `json:"input,omitempty"`     // tool_use arguments
	ToolUseID string          `json:"toolUseId,omitempty"` // tool_result → tool_use
	IsError   bool            `json:"isError,omitempty"`
}

// Node is one message of the tree. Content is either a plain string (Text)
// or a list of typed blocks (Blocks); on the wire it is the JSON string or
// array respectively.
type Node struct {
	ID        string         `json:"id"`
	ParentID  string         `json:"parentId"` // "" for a root; serialised as null
	Role      string         `json:"role"`
	Text      string         `json:"-"`
	Blocks    []Block        `json:"-"`
	Timestamp int64          `json:"timestamp"` // unix seconds
	Channel   string         `json:"channel,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Key identifies one session: the agent, the channel and the session ID
// (by default the actor's user ID on that channel).
type Key struct {
	AgentID string `json:"agentId"`
	Channel string `json:"channel"`
	ID      string `json:"id"`
}

// ErrNotFound is returned for an unknown session or node.
var ErrNotFound = errors.New("session: not found")

// ErrLeafMoved is returned by Append when the first node's ParentID is not
// the session's active leaf (nor "" on an empty session): another writer
// moved the leaf after the caller read it. Nothing was written. The error
// is a *LeafMovedError; re-read Leaf and decide again.
var ErrLeafMoved = errors.New("session: active leaf moved")

// LeafMovedError is the ErrLeafMoved of one Append: Expected is the first
// node's ParentID, Actual the active leaf found ("" for an empty session).
type LeafMovedError struct {
	Key      Key
	Expected string
	Actual   string
}

func (e *LeafMovedError) Error() string {
	return fmt.Sprintf("append %s: %v: the first node's parent is %q but the active leaf is %q",
		e.Key, ErrLeafMoved, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrLeafMoved) true.
func (e *LeafMovedError) Is(target error) bool { return target == ErrLeafMoved }

// MaxNodeBytes bounds one node's JSON encoding (EncodeNode): 16 MiB. Images
// are references, tool output is capped far lower, so only broken or
// hostile input reaches it.
const MaxNodeBytes = 16 << 20

// EncodeNode returns n's JSON (Node.MarshalJSON), the bytes every backend
// stores. ErrInvalidNode if the encoding exceeds MaxNodeBytes. Strings are
// JSON-escaped, so NUL and other control bytes in text survive every
// backend; invalid UTF-8 becomes U+FFFD, as with encoding/json.
func EncodeNode(n Node) ([]byte, error) {
	b, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode node %s: %w", n.ID, err)
	}
	if len(b) > MaxNodeBytes {
		return nil, fmt.Errorf("%w: node %.40q encodes to %d bytes (max %d)", ErrInvalidNode, n.ID, len(b), MaxNodeBytes)
	}
	return b, nil
}

// Store is a session backend. Implementations: jsonl (embedded default),
// redisstore and pgstore. All must pass sessiontest.Exercise.
//
// Append is durable when it returns: a turn is acknowledged only after that.
// Writes to one key are serialised; reads may run concurrently.
type Store interface {
	// Append writes nodes in order and moves the active leaf to the last
	// one. The first node's ParentID must be the active leaf ("" for an
	// empty session), else *LeafMovedError (ErrLeafMoved), checked
	// atomically with the write, so two writers can never fork a session
	// by accident; to start a branch elsewhere, SetLeaf first (BranchFrom).
	// Later nodes may point at any node of the session or of the batch.
	// ErrInvalidKey, ErrInvalidNode, ErrDuplicateNode, or ErrNotFound for an
	// unknown parent come first. On any error nothing is written.
	Append(ctx context.Context, key Key, nodes ...Node) error
	// Leaf returns the active leaf ID ("" for an empty session).
	Leaf(ctx context.Context, key Key) (string, error)
	// SetLeaf switches the active leaf to an existing node.
	SetLeaf(ctx context.Context, key Key, nodeID string) error
	// Path returns up to max nodes ending at leafID, oldest first, walking
	// parentId. max <= 0 means no limit.
	Path(ctx context.Context, key Key, leafID string, max int) ([]Node, error)
	// Nodes returns every node of the session in append order.
	Nodes(ctx context.Context, key Key) ([]Node, error)
	// List returns the keys of an agent's sessions ("" = all agents).
	List(ctx context.Context, agentID string) ([]Key, error)
	// Clear removes a session.
	Clear(ctx context.Context, key Key) error
	Close() error
}

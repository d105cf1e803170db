package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// ErrNotFound is returned by Get for an unknown ID.
var ErrNotFound = errors.New("memory: not found")

// RejectionStore remembers rejected content per actor by normalised hash
// (SPEC §4.4) so that it is never proposed again. Stores that implement it
// persist the hashes with the actor's memory and drop them on Forget.
type RejectionStore interface {
	// IsRejected reports whether content (normalised by ContentHash) was
	// rejected for the actor.
	IsRejected(ctx context.Context, actorID, content string) (bool, error)
	// MarkRejected remembers content's hash as rejected for the actor.
	MarkRejected(ctx context.Context, actorID, content string) error
}

// ContentHash is the normalised content hash used for rejections and
// duplicate detection: "sha256:" + hex of the NFKC-normalised, lowercased
// text with punctuation removed and whitespace collapsed, so "I only use
// ORGANIC fertiliser!" and "i only use organic fertiliser" hash alike.
func ContentHash(content string) string {
	s := strings.ToLower(norm.NFKC.String(content))
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
		default:
			space = true
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

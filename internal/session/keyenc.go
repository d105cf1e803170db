package session

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxEncodedLen is the longest EncodeID output in bytes. It keeps
// "<channel>_<id>.jsonl" plus a ".torn-<unix>" or archive suffix under the
// 255-byte file-name limit of common file systems.
const MaxEncodedLen = 96

const hexdigits = "0123456789abcdef"

// EncodeID maps any string to a file-name-safe, injective encoding:
//
//   - bytes [a-z0-9-] are kept;
//   - every other byte, including upper-case letters, '.', '/', '\\', '_',
//     ':', NUL, '%' and each byte of non-ASCII UTF-8 (so Unicode look-alikes
//     never meet), becomes "%xx" with two lower-case hex digits. Encoding
//     upper case too keeps distinct IDs distinct on case-insensitive file
//     systems (macOS, Windows);
//   - an encoding longer than MaxEncodedLen is cut at an escape boundary and
//     suffixed with "%h" and the first 40 hex digits (160 bits) of the
//     SHA-256 of the whole ID. "%h" never occurs otherwise, so the two forms
//     cannot collide, and the result stays injective up to SHA-256
//     collisions.
//
// The output is never empty for a non-empty input, never "." or "..", and
// never contains '_' or a path separator, so "<channel>_<id>" splits
// unambiguously. DecodeID inverts it except for the hashed form.
func EncodeID(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	enc := b.String()
	if len(enc) <= MaxEncodedLen {
		return enc
	}
	sum := sha256.Sum256([]byte(s))
	const tail = 2 + 40
	cut := MaxEncodedLen - tail
	// Do not cut inside an escape: step back to its '%'.
	for i := cut - 1; i >= 0 && i >= cut-2; i-- {
		if enc[i] == '%' {
			cut = i
			break
		}
	}
	return enc[:cut] + "%h" + hex.EncodeToString(sum[:])[:40]
}

// DecodeID inverts EncodeID. ok is false for the hashed (shortened) form and
// for any string EncodeID cannot produce.
func DecodeID(enc string) (s string, ok bool) {
	if enc == "" {
		return "", false
	}
	b := make([]byte, 0, len(enc))
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-':
			b = append(b, c)
		case c == '%' && i+2 < len(enc):
			hi, lo := unhex(enc[i+1]), unhex(enc[i+2])
			if hi < 0 || lo < 0 {
				return "", false
			}
			v := byte(hi<<4 | lo)
			if ('a' <= v && v <= 'z') || ('0' <= v && v <= '9') || v == '-' {
				return "", false // not canonical
			}
			b = append(b, v)
			i += 2
		default:
			return "", false
		}
	}
	return string(b), true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

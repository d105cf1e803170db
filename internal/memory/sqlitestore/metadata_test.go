package sqlitestore

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tendrilai/tendril/internal/memory/markdown"
)

// slowMetadata is decodeJSONMetadata without its fast path.
func slowMetadata(s string) map[string]any {
	if s == "" || s == "null" {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return markdown.DecodeMetadata(m)
}

var metadataSeeds = []string{
	`{"section":"general","statedAt":{"$time":"2026-12-07T14:59:51.094369771Z"},"type":"event"}`,
	`{"agentId":"main"}`, `{}`, `{"a":""}`, `{"a":"b","a":"c"}`, `{"é":"ü","k":"日本"}`,
	`{"t":{"$time":"not a time"}}`, `{"t":{"$time":"2026-01-02T03:04:05+09:00"}}`,
	`{"t":{"$time":"2026-01-02T03:04:05Z","x":1}}`, `{"t":{"$time":1}}`,
	`{"a":"x\"y"}`, `{"a":"x\\y"}`, `{"a":"x\u0041"}`, "{\"a\":\"x\ty\"}", "{\"a\":\"\xff\"}",
	`{"a":1}`, `{"a":true}`, `{"a":null}`, `{"a":["x","y"]}`, `{"a":{"b":"c"}}`,
	`{ "a":"b"}`, `{"a" :"b"}`, `{"a":"b" }`, `{"a":"b",}`, `{"a":"b"}}`, `{"a":"b"`, `{"a"}`, `{"a":}`,
	`{"a":"b"x}`, `{"a":"b","c"}`, `{"a":"b"} `, `[]`, `"x"`, `{`, `}`, `{"`, `{"a":"`,
}

// TestDecodeFlatMetadata: wherever the fast path answers, it answers as
// encoding/json and DecodeMetadata do; it answers for the shapes the
// store writes.
func TestDecodeFlatMetadata(t *testing.T) {
	for _, s := range metadataSeeds {
		checkFlatMetadata(t, s)
	}
	for _, s := range []string{metadataSeeds[0], `{"agentId":"main"}`, `{}`, `{"t":{"$time":"2026-01-02T03:04:05+09:00"}}`} {
		if _, ok := decodeFlatMetadata(s); !ok {
			t.Errorf("%s: not read by the fast path", s)
		}
	}
	m, _ := decodeFlatMetadata(metadataSeeds[0])
	for k := range m {
		if metaKeys[k] == "" {
			t.Errorf("key %q not shared", k)
		}
	}
}

func checkFlatMetadata(t *testing.T, s string) {
	t.Helper()
	fast, ok := decodeFlatMetadata(s)
	if !ok {
		return
	}
	if slow := slowMetadata(s); !reflect.DeepEqual(fast, slow) {
		t.Errorf("%q: fast path %#v, encoding/json %#v", s, fast, slow)
	}
}

func FuzzDecodeFlatMetadata(f *testing.F) {
	for _, s := range metadataSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkFlatMetadata(t, s) })
}

// BenchmarkDecodeMetadata decodes a record's metadata column as the store
// writes it, through encoding/json (slow) and through decodeJSONMetadata.
func BenchmarkDecodeMetadata(b *testing.B) {
	s := metadataSeeds[0]
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			slowMetadata(s)
		}
	})
	b.Run("flat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeJSONMetadata(s)
		}
	})
}

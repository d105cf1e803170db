package tgmd_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/tendrilai/tendril/internal/channel/telegram/tgmd"
)

// benchReply is a ~24 KB model reply mixing the constructs models write.
var benchReply = strings.Repeat(`## Watering plan

Your **petunias** wilt in the afternoon because the pots dry out; water *early*, before 8:00.
See [the guide](https://example.com/guide_(petunias)) and use `+"`organic`"+` feed & mulch < 5 cm.

- Morning: water deeply
- Evening: check the soil
  1. finger test
  2. weigh the pot

> Tip: group pots together to keep them cool.

| Plant | Water | Sun |
|---|---|---|
| Petunia | daily | full |
| Basil | 2 days | part |

`+"```python\nfor pot in pots:\n    water(pot, ml=250)  # <- adjust\n```\n\n", 30)

// BenchmarkRenderChunk measures Markdown → Telegram HTML plus chunking at
// 4000 UTF-16 units, in MB/s of Markdown input.
func BenchmarkRenderChunk(b *testing.B) {
	b.SetBytes(int64(len(benchReply)))
	for b.Loop() {
		if len(tgmd.Chunk(tgmd.Render(benchReply), tgmd.MaxChunk)) == 0 {
			b.Fatal("no chunks")
		}
	}
}

// BenchmarkGoldmarkHTML is the reference: goldmark's own HTML renderer with
// the same extensions, no chunking.
func BenchmarkGoldmarkHTML(b *testing.B) {
	md := goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough))
	src := []byte(benchReply)
	var buf bytes.Buffer
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		buf.Reset()
		if err := md.Convert(src, &buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender and BenchmarkChunk split BenchmarkRenderChunk.
func BenchmarkRender(b *testing.B) {
	b.SetBytes(int64(len(benchReply)))
	for b.Loop() {
		tgmd.Render(benchReply)
	}
}

func BenchmarkChunk(b *testing.B) {
	html := tgmd.Render(benchReply)
	b.SetBytes(int64(len(benchReply)))
	for b.Loop() {
		tgmd.Chunk(html, tgmd.MaxChunk)
	}
}

// BenchmarkPrepare is what Send does: HTML chunks plus the plain-text
// rendering and the offsets mapping one onto the other.
func BenchmarkPrepare(b *testing.B) {
	b.SetBytes(int64(len(benchReply)))
	for b.Loop() {
		if len(tgmd.Prepare(benchReply, tgmd.MaxChunk).HTML) == 0 {
			b.Fatal("no chunks")
		}
	}
}

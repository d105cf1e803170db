package search

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRelENPrefilterExact: skipping the regular expression when no key
// word is present never changes ResolveRelative's result.
func TestRelENPrefilterExact(t *testing.T) {
	ref := time.Date(2023, 5, 8, 13, 0, 0, 0, time.UTC)
	pieces := []string{"I", "went", "Yesterday", "LAST", "night", "this", "Morning", "two", "weeks", "ago",
		"a couple of", "days", "next", "Friday", "past", "summer", "fall", "Autumn", "tomorrow", "today",
		"3", "months", "year", "the", "garden", "painted", "Tonight", "weekend", "ago.", ",", "Sunday"}
	rng := rand.New(rand.NewSource(1))
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for k := rng.Intn(8); k >= 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
			b.WriteByte(" \n,."[rng.Intn(4)])
		}
		text := b.String()
		got := ResolveRelative(text, ref)
		var want []Resolved
		day := midnight(ref)
		for _, m := range reRelEN.FindAllStringSubmatch(text, -1) {
			if r, ok := resolveEN(m, day); ok {
				want = append(want, r)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v, want %v", text, got, want)
		}
		if len(want) > 0 && !mayHoldRelEN(text) {
			t.Fatalf("%q matches but the prefilter skips it", text)
		}
	}
}

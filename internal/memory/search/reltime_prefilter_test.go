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

// TestRelENStartsExact: trying reRelENAt at relENStarts' positions (as
// ResolveRelative does) finds exactly the matches of reRelEN over the
// whole text, on random ASCII texts made
// of the expression's words, look-alikes ("birthday", "3days", "_week")
// and every kind of separator, including runs of spaces and tabs.
func TestRelENStartsExact(t *testing.T) {
	pieces := []string{"day", "before", "yesterday", "Day Before Yesterday", "last", "night", "this", "morning",
		"a", "couple", "of", "a couple of", "few", "an", "one", "several", "3", "12", "days", "weeks", "week",
		"weekend", "months", "year", "years", "ago", "AGO", "next", "past", "Sunday", "friday", "summer",
		"fall", "autumn", "spring", "winter", "today", "tonight", "tomorrow", "birthday", "3days", "_week",
		"week_", "dayago", "x", "lake", "2023", "ago_", "a_couple"}
	seps := []string{" ", "  ", "\t", "\n", ",", ".", "-", "_", "", " \t ", "!", "'"}
	ref := time.Date(2023, 5, 8, 13, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewSource(7))
	for n := 0; n < 50000; n++ {
		var b strings.Builder
		for k := rng.Intn(12); k >= 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
			b.WriteString(seps[rng.Intn(len(seps))])
		}
		text := b.String()
		want := reRelEN.FindAllStringSubmatch(text, -1)
		var got [][]string
		end := 0
		for _, st := range relENStarts(text) {
			if st < end {
				continue
			}
			if m := reRelENAt.FindStringSubmatch(text[st:]); m != nil {
				end = st + len(m[0])
				got = append(got, m)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: starts %v give %q, the whole text %q", text, relENStarts(text), got, want)
		}
		if r := ResolveRelative(text, ref); len(r) > len(want) {
			t.Fatalf("%q: %d resolved from %d matches", text, len(r), len(want))
		}
	}
}

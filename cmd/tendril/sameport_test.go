package main

import "testing"

func TestSamePort(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", ":8080", true},
		{"127.0.0.1:8080", "0.0.0.0:8080", true},
		{"127.0.0.1:6060", "127.0.0.1:8080", false},
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"127.0.0.1:0", ":0", false},
		{"nonsense", ":8080", false},
	} {
		if got := samePort(c.a, c.b); got != c.want {
			t.Errorf("samePort(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

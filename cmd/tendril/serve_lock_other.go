//go:build !unix

package main

// lockHome is a no-op where flock is unavailable.
func lockHome(string) (func(), error) { return func() {}, nil }

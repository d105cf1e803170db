package memory

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		in, gone string
	}{
		{"my openai key is sk-proj-abcdefghijklmnopqrstuv please keep it", "sk-proj-abcdefghijklmnop"},
		{"card 4111 1111 1111 1111 exp 12/28", "4111 1111 1111 1111"},
		{"my password is hunter2", "hunter2"},
		{"password: hunter2!", "hunter2"},
		{"aws AKIAIOSFODNN7EXAMPLE ok", "AKIAIOSFODNN7EXAMPLE"},
		{"bot token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"},
		{"제 비밀번호는 qwerty123 이에요", "qwerty123"},
		{"pw: tr0ub4dor&3", "tr0ub4dor&3"},
		{"passphrase: correct horse", "correct"},
		{"password：hunter3", "hunter3"},
		{"la contraseña es hunter4", "hunter4"},
		{"My pass word is letmein99", "letmein99"},
		{"SSN 123-45-6789", "123-45-6789"},
		{"wifi password is hunter2 and key sk-proj-abcdefghijklmnopqrstu", "hunter2"},
	} {
		got, changed := Redact(tc.in)
		if !changed || strings.Contains(got, tc.gone) || !strings.Contains(got, Redacted) {
			t.Errorf("Redact(%q) = %q", tc.in, got)
		}
	}
	for _, keep := range []string{
		"I only use organic fertiliser",
		"I planted 12 tomatoes on 2024-03-05",
		"call me at 1234 5678",      // not a card: too short
		"order 4111 1111 1111 1112", // fails Luhn
		"저는 부산에 살아요",
	} {
		if got, changed := Redact(keep); changed {
			t.Errorf("Redact(%q) changed it to %q", keep, got)
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("password is x")
	f.Add("4111111111111111")
	f.Fuzz(func(t *testing.T, s string) {
		out, _ := Redact(s)
		if again, _ := Redact(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", s, out, again)
		}
	})
}

// redactRegexps is Redact without the literal hints: every regexp runs.
func redactRegexps(text string) string {
	out := text
	for _, re := range secretPatterns {
		out = re.ReplaceAllString(out, Redacted)
	}
	for _, re := range statedSecrets {
		out = re.ReplaceAllString(out, "${1}"+Redacted)
	}
	out = ssnRE.ReplaceAllString(out, Redacted)
	return cardRE.ReplaceAllStringFunc(out, func(m string) string {
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, m)
		if len(digits) >= 13 && luhn(digits) {
			return Redacted
		}
		return m
	})
}

var redactSeeds = []string{
	"", "plain words about tomatoes", "my password is hunter2", "My PASSWORD: x", "pin 1234", "the api key = abc",
	"token: zzz", "mot de passe est secret", "contraseña es abc", "senha é 123", "비밀번호는 1234", "비번 abc",
	"sk-abcdefghijklmnopqrstuv", "sk-ant-abcdefghijklmnopqrstuv", "AKIAABCDEFGHIJKLMNOP", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
	"xoxb-1234567890-abc", "123456789:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789", "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.sig",
	"-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----", "ssn 123-45-6789", "card 4111 1111 1111 1111",
	"4111-1111-1111-1112", "pa\u017fsword is x", "to\u212Aen is x", "PassWord is déjà", "(2026-06-01) user: my pw is abc",
}

// The hints only skip regexps that cannot match: Redact equals running
// every regexp.
func TestRedactHintsAreExact(t *testing.T) {
	for _, s := range redactSeeds {
		if got, want := first(Redact(s)), redactRegexps(s); got != want {
			t.Errorf("Redact(%q) = %q, want %q", s, got, want)
		}
	}
}

func FuzzRedactHints(f *testing.F) {
	for _, s := range redactSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := first(Redact(s)), redactRegexps(s); got != want {
			t.Errorf("Redact(%q) = %q, want %q", s, got, want)
		}
	})
}

func first(s string, _ bool) string { return s }

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

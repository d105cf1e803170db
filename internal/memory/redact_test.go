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

// A stated secret loses its value and keeps the words that name it: the
// keyword, the nouns and "for the …" phrase after it, and the connector.
// Sentences that only use the words stay whole.
func TestRedactStatedSecret(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"My password is hunter2xyz", "My password is [redacted]"},
		{"my secret code is PURPLEWOMBAT", "my secret code is [redacted]"},
		{"My secret garden code is PURPLEWOMBAT", "My secret garden code is [redacted]"},
		{"the wifi password for the shed: GreenShed2024", "the wifi password for the shed: [redacted]"},
		{"the password of my bank account is Tr0ub4dor", "the password of my bank account is [redacted]"},
		{"my secret is PURPLEWOMBAT", "my secret is [redacted]"},
		{"the secret key for the vault = abc123", "the secret key for the vault = [redacted]"},
		{"my pin is 1234 and my pin code is 5678", "my pin is [redacted] and my pin code is [redacted]"},
		{"password is: hunter2", "password is: [redacted]"},
		{"password hunter2", "password [redacted]"},
		{"the api key for staging is sk_live_x", "the api key for staging is [redacted]"},
		{"와이파이 비밀번호는 GreenShed2024 이에요", "와이파이 비밀번호는 [redacted] 이에요"},
		{"창고 비번: 사과나무", "창고 비번: [redacted]"},
		{"비밀번호1234", "비밀번호[redacted]"},
		{"비밀번호는1234", "비밀번호는[redacted]"},
		{"비번 abc123", "비번 [redacted]"},
		// A predicate after a word connector is no value; a word between
		// the keyword and the connector may be.
		{"my password was stolen", "my password was stolen"},
		{"My password is wrong again", "My password is wrong again"},
		{"the pin was changed yesterday", "the pin was changed yesterday"},
		{"password letmein is what I use", "password [redacted] is what I use"},
		{"my password manager is great", "my password manager is great"},
		{"the password reset is broken", "the password reset is broken"},
		{"my password is letmein", "my password is [redacted]"},
		{"my password is Stolen", "my password is [redacted]"},
		{"my password was stolen2024", "my password was [redacted]"},
		{"password: stolen", "password: [redacted]"},
		{"password = wrong", "password = [redacted]"},
		// Ordinary sentences.
		{"the secret to good figs is water", "the secret to good figs is water"},
		{"The secret garden is lovely in May", "The secret garden is lovely in May"},
		{"I forgot to reset my password yesterday", "I forgot to reset my password yesterday"},
		{"pin the poster on the door", "pin the poster on the door"},
		{"the password island ferry", "the password island ferry"},
		{"암호화폐는 위험해요", "암호화폐는 위험해요"},
		{"비밀번호를 잊어버렸어요", "비밀번호를 잊어버렸어요"},
		{"비밀번호 변경 완료", "비밀번호 변경 완료"},
	} {
		if got, _ := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
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
	out = redactStatedEnglish(out)
	out = statedSecrets[1].ReplaceAllString(out, statedKeep+Redacted)
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
	"my secret garden code is PURPLEWOMBAT", "the wifi password for the shed: x", "the secret to good figs is water",
	"pin 1234", "암호화폐는 위험해요", "비밀번호는1234", "my password was stolen", "password letmein is what I use",
	"PASSWORD MANAGER IS GREAT", "password is wrong", "my pin is 1234 and my password is wrong",
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

// Package persona loads the assistant's persona (SPEC §5) and ships the
// default one, Sprout the gardening helper, with its skills.
//
// A persona is <home>/persona.md: optional YAML front matter, then the
// Markdown persona text that opens the system prompt.
//
//	---
//	name: Sprout
//	anchors:
//	  - I am Sprout, a warm and practical gardening helper.
//	  - I give advice that is safe for people, pets and plants.
//	---
//	# Sprout
//	You are Sprout, …
//
// name is what the assistant calls itself (default: the first "# " heading
// of the body, else "Assistant"). anchors are the identity anchors,
// re-injected when the circuit breaker trips (SPEC §6.2). Identity anchors
// set in tendril.json (agent.identityAnchors) take precedence; the caller
// applies that.
//
// Swapping persona.md, skills.json and skills/ turns Tendril into another
// assistant with no code change; see examples/.
package persona

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed defaults
var defaults embed.FS

// Defaults is the default home content: persona.md, skills.json and
// skills/<name>/SKILL.md for weather, reminders and plant-notes.
func Defaults() fs.FS {
	sub, err := fs.Sub(defaults, "defaults")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// FileName is the default persona file in the home directory.
const FileName = "persona.md"

// MaxFileBytes caps persona.md (64 KiB); a larger file is an error.
const MaxFileBytes = 64 << 10

// Persona is the loaded persona.
type Persona struct {
	Name    string   `json:"name"`
	Text    string   `json:"text"` // Markdown body, front matter removed, trimmed
	Anchors []string `json:"anchors"`
	// Source is the file it was read from, or "embedded:persona.md".
	Source string `json:"source"`
}

// Default returns the embedded Sprout persona.
func Default() Persona {
	data, err := fs.ReadFile(Defaults(), FileName)
	if err != nil {
		panic(err)
	}
	p, err := Parse(data)
	if err != nil {
		panic(fmt.Sprintf("embedded persona: %v", err))
	}
	p.Source = "embedded:" + FileName
	return p
}

// Load reads the persona from personaFile, resolved against home when
// relative ("" means persona.md). When the file does not exist it returns
// the embedded default (Source "embedded:persona.md") and no error. A file
// that exists but is unreadable, over MaxFileBytes, has broken front
// matter or an empty body returns an error naming the file; the caller
// should report it and may fall back to Default().
func Load(home, personaFile string) (Persona, error) {
	if personaFile == "" {
		personaFile = FileName
	}
	p := personaFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return Persona{}, fmt.Errorf("load persona: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return Persona{}, fmt.Errorf("load persona %s: %w", p, err)
	}
	if len(data) > MaxFileBytes {
		return Persona{}, fmt.Errorf("load persona %s: over the %d byte limit", p, MaxFileBytes)
	}
	per, err := Parse(data)
	if err != nil {
		return Persona{}, fmt.Errorf("load persona %s: %w", p, err)
	}
	per.Source = p
	return per, nil
}

type frontMatter struct {
	Name    string   `yaml:"name"`
	Anchors []string `yaml:"anchors"`
}

// Parse parses persona.md bytes: optional front matter with name and
// anchors (a list of strings; empty entries are dropped), then the body.
func Parse(data []byte) (Persona, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	var fm frontMatter
	body := text
	if strings.HasPrefix(text, "---\n") {
		rest := text[len("---\n"):]
		var front string
		switch i := strings.Index(rest, "\n---\n"); {
		case strings.HasPrefix(rest, "---\n"):
			front, body = "", rest[len("---\n"):]
		case i >= 0:
			front, body = rest[:i], rest[i+len("\n---\n"):]
		case strings.HasSuffix(rest, "\n---"):
			front, body = strings.TrimSuffix(rest, "\n---"), ""
		default:
			return Persona{}, errors.New("front matter has no closing --- line")
		}
		dec := yaml.NewDecoder(strings.NewReader(front))
		dec.KnownFields(true)
		if err := dec.Decode(&fm); err != nil && !errors.Is(err, io.EOF) {
			return Persona{}, fmt.Errorf("front matter: want name (string) and anchors (list of strings): %w", err)
		}
	}
	body = strings.TrimSpace(body)
	if body == "" {
		return Persona{}, errors.New("persona text is empty")
	}
	p := Persona{Name: strings.TrimSpace(fm.Name), Text: body}
	for _, a := range fm.Anchors {
		if a = strings.TrimSpace(a); a != "" {
			p.Anchors = append(p.Anchors, a)
		}
	}
	if p.Name == "" {
		p.Name = "Assistant"
		for _, line := range strings.Split(body, "\n") {
			if h, ok := strings.CutPrefix(line, "# "); ok && strings.TrimSpace(h) != "" {
				p.Name = strings.TrimSpace(h)
				break
			}
		}
	}
	return p, nil
}

// Install writes the default persona.md, skills.json and skills/ into home,
// creating directories as needed. It never overwrites an existing file, so
// it is safe on every start; it returns the paths it wrote.
func Install(home string) (written []string, err error) {
	return InstallFS(home, Defaults())
}

// InstallFS is Install from another tree, e.g. os.DirFS("examples/fitness-coach").
func InstallFS(home string, src fs.FS) (written []string, err error) {
	err = fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return os.MkdirAll(home, 0o700)
		}
		dst := filepath.Join(home, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if path.Base(p) == "README.md" && path.Dir(p) == "." {
			return nil // documentation of an example, not home content
		}
		data, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		ok, err := writeNew(dst, data)
		if err != nil {
			return err
		}
		if ok {
			written = append(written, dst)
		}
		return nil
	})
	if err != nil {
		return written, fmt.Errorf("install persona into %s: %w", home, err)
	}
	return written, nil
}

// writeNew creates dst with data unless it exists. The bytes go to a
// temporary file first, so a crash never leaves a half-written persona.
func writeNew(dst string, data []byte) (bool, error) {
	if _, err := os.Lstat(dst); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".install-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	// Link fails if dst appeared meanwhile, so a concurrent edit is never clobbered.
	if err := os.Link(tmp.Name(), dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		// No hard links on this filesystem: fall back to an exclusive create.
		f, cerr := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(cerr, fs.ErrExist) {
			return false, nil
		}
		if cerr != nil {
			return false, cerr
		}
		if _, werr := f.Write(data); werr != nil {
			f.Close()
			os.Remove(dst)
			return false, werr
		}
		return true, f.Close()
	}
	if err := os.Chmod(dst, 0o644); err != nil {
		return true, err
	}
	return true, nil
}

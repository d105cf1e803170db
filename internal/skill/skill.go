// Package skill loads skills in the AgentSkills / OpenClaw SKILL.md format
// (https://agentskills.io/specification) and the skills.json manifest that
// selects the active ones (SPEC §5).
//
// A skill is a folder <dir>/<name>/ holding SKILL.md:
//
//	---
//	name: weather
//	description: Check the forecast before giving watering or planting advice.
//	---
//	# Weather
//	Instructions in Markdown…
//
// The manifest is {"skills": ["weather", "reminders", "plant-notes"]}.
// Malformed skills never stop Tendril: Load skips them and reports a Problem
// for each, which `tendril doctor` prints.
package skill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// FileName is the file every skill folder holds.
const FileName = "SKILL.md"

// Limits from the AgentSkills specification, plus a size cap of our own.
const (
	MaxNameLen        = 64
	MaxDescriptionLen = 1024
	MaxFileBytes      = 256 << 10 // SKILL.md larger than this is rejected
)

// namePattern is the AgentSkills name rule: lowercase letters, digits and
// single hyphens, not at either end.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Skill is one parsed SKILL.md.
type Skill struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	Instructions string `json:"instructions"` // the Markdown body after the front matter, trimmed
	// Extra holds the other front-matter fields (license, compatibility,
	// metadata, allowed-tools, …) as decoded YAML.
	Extra map[string]any `json:"extra,omitempty"`
	Path  string         `json:"path,omitempty"` // the SKILL.md it came from
}

// Problem is a skill that was skipped, or a manifest entry that could not be
// honoured.
type Problem struct {
	Skill string `json:"skill"` // the manifest entry or folder name
	Path  string `json:"path"`  // the file or folder concerned
	Err   error  `json:"-"`
}

func (p Problem) Error() string { return fmt.Sprintf("skill %q (%s): %v", p.Skill, p.Path, p.Err) }

// MarshalJSON adds the error text as "error".
func (p Problem) MarshalJSON() ([]byte, error) {
	type plain Problem
	msg := ""
	if p.Err != nil {
		msg = p.Err.Error()
	}
	return json.Marshal(struct {
		plain
		Error string `json:"error"`
	}{plain(p), msg})
}

// Errors a Problem wraps.
var (
	ErrNoFrontMatter = errors.New("SKILL.md has no YAML front matter (it must start with a --- line)")
	ErrMissingField  = errors.New("missing required front-matter field")
	ErrBadName       = errors.New("invalid skill name")
	ErrNotFound      = errors.New("skill not found")
)

// ValidName reports whether name is a valid AgentSkills name: 1–64
// characters of a-z, 0-9 and single hyphens, not starting or ending with one.
func ValidName(name string) bool {
	return len(name) <= MaxNameLen && namePattern.MatchString(name)
}

// Parse parses the bytes of a SKILL.md. It checks the front matter is
// present, is valid YAML, and holds a valid name and a non-empty description
// of at most 1024 characters. It does not compare the name to a folder.
func Parse(data []byte) (Skill, error) {
	if len(data) > MaxFileBytes {
		return Skill{}, fmt.Errorf("SKILL.md is %d bytes, over the %d byte limit", len(data), MaxFileBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return Skill{}, ErrNoFrontMatter
	}
	rest := text[len("---\n"):]
	var front, body string
	if strings.HasPrefix(rest, "---\n") || rest == "---" {
		front, body = "", strings.TrimPrefix(strings.TrimPrefix(rest, "---"), "\n")
	} else if i := strings.Index(rest, "\n---\n"); i >= 0 {
		front, body = rest[:i], rest[i+len("\n---\n"):]
	} else if strings.HasSuffix(rest, "\n---") {
		front, body = strings.TrimSuffix(rest, "\n---"), ""
	} else {
		return Skill{}, fmt.Errorf("%w: the closing --- line is missing", ErrNoFrontMatter)
	}

	var fm map[string]any
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return Skill{}, fmt.Errorf("front matter is not valid YAML: %w", err)
	}
	name, err := stringField(fm, "name")
	if err != nil {
		return Skill{}, err
	}
	desc, err := stringField(fm, "description")
	if err != nil {
		return Skill{}, err
	}
	if !ValidName(name) {
		return Skill{}, fmt.Errorf("%w %q: use 1-%d of a-z, 0-9 and single hyphens", ErrBadName, name, MaxNameLen)
	}
	if n := len([]rune(desc)); n > MaxDescriptionLen {
		return Skill{}, fmt.Errorf("description is %d characters, over the %d limit", n, MaxDescriptionLen)
	}
	delete(fm, "name")
	delete(fm, "description")
	if len(fm) == 0 {
		fm = nil
	}
	return Skill{Name: name, Description: desc, Instructions: strings.TrimSpace(body), Extra: fm}, nil
}

func stringField(fm map[string]any, key string) (string, error) {
	v, ok := fm[key]
	if !ok || v == nil {
		return "", fmt.Errorf("%w %q", ErrMissingField, key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("front-matter field %q must be a string, not %T", key, v)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w %q (empty)", ErrMissingField, key)
	}
	return s, nil
}

// LoadFile reads and parses dir/<name>/SKILL.md and checks that the
// front-matter name equals the folder name.
func LoadFile(dir, name string) (Skill, error) {
	if !ValidName(name) {
		return Skill{}, fmt.Errorf("%w %q: use 1-%d of a-z, 0-9 and single hyphens", ErrBadName, name, MaxNameLen)
	}
	path := filepath.Join(dir, name, FileName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Skill{}, fmt.Errorf("%w: %s does not exist", ErrNotFound, path)
	}
	if err != nil {
		return Skill{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return Skill{}, err
	}
	s, err := Parse(data)
	if err != nil {
		return Skill{}, err
	}
	if s.Name != name {
		return Skill{}, fmt.Errorf("%w: front-matter name %q differs from its folder %q", ErrBadName, s.Name, name)
	}
	s.Path = path
	return s, nil
}

// Manifest is skills.json.
type Manifest struct {
	Skills []string `json:"skills"`
}

// LoadManifest reads a skills.json. It returns an error wrapping
// fs.ErrNotExist when the file is absent, and a descriptive error when it
// is not a JSON object with a "skills" string array.
func LoadManifest(path string) (Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("read skills manifest: %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("skills manifest %s: want {\"skills\": [\"name\", …]}: %w", path, err)
	}
	return m, nil
}

// Load reads the manifest at manifestPath and loads each skill it names from
// dir/<name>/SKILL.md, in manifest order.
//
// Every skill that is missing, malformed (no front matter, bad YAML, missing
// name or description, name differing from its folder), duplicated in the
// manifest or not a valid name is skipped and reported as a Problem. A
// missing manifest means no active skills and one Problem. err is non-nil
// only when the manifest exists but cannot be read or parsed; the caller
// should then log it and run with no skills, never fail.
func Load(dir, manifestPath string) (active []Skill, problems []Problem, err error) {
	m, err := LoadManifest(manifestPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, []Problem{{Skill: "", Path: manifestPath, Err: fmt.Errorf("no skills manifest, no skills active: %w", ErrNotFound)}}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	seen := make(map[string]bool)
	for _, name := range m.Skills {
		if seen[name] {
			problems = append(problems, Problem{Skill: name, Path: manifestPath, Err: errors.New("listed twice in the manifest")})
			continue
		}
		seen[name] = true
		s, err := LoadFile(dir, name)
		if err != nil {
			path := manifestPath
			if ValidName(name) {
				path = filepath.Join(dir, name, FileName)
			}
			problems = append(problems, Problem{Skill: name, Path: path, Err: err})
			continue
		}
		active = append(active, s)
	}
	return active, problems, nil
}

// LoadAll loads every skill folder in dir, whether the manifest names it or
// not, sorted by name. It is for `tendril doctor` and the dashboard.
func LoadAll(dir string) ([]Skill, []Problem, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read skills dir: %w", err)
	}
	var skills []Skill
	var problems []Problem
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		s, err := LoadFile(dir, e.Name())
		if err != nil {
			problems = append(problems, Problem{Skill: e.Name(), Path: filepath.Join(dir, e.Name()), Err: err})
			continue
		}
		skills = append(skills, s)
	}
	sort.Slice(skills, func(i, j int) bool { return skills[i].Name < skills[j].Name })
	return skills, problems, nil
}

// PromptSection renders the active skills for the system prompt: a "##
// Skills" heading, one line of guidance, then for each skill in the given
// order a "### name" heading, its description and its instructions. It
// returns "" when active is empty.
func PromptSection(active []Skill) string {
	if len(active) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Skills\n\n")
	b.WriteString("These skills are enabled. When a request matches a skill's description, follow its instructions.\n\n")
	b.WriteString("Enabled skills: ")
	for i, s := range active {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Name)
	}
	b.WriteString("\n")
	for _, s := range active {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n", s.Name, s.Description)
		if s.Instructions != "" {
			fmt.Fprintf(&b, "\n%s\n", s.Instructions)
		}
	}
	return b.String()
}

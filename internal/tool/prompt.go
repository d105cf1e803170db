package tool

import (
	"fmt"
	"strings"
)

// PromptSection renders the tools offered on a turn for the system prompt:
// a "## Tools" heading, then one line per tool in the given order,
// "- name (class): description". Write and exec tools are marked as
// needing approval so the model can tell the user why a call may pause.
// It returns "" when tools is empty.
func PromptSection(tools []Tool) string {
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Tools\n\nYou can call these tools. Tools marked \"may need approval\" can pause until the user approves the exact call.\n\n")
	for _, t := range tools {
		desc := strings.Join(strings.Fields(t.Description()), " ")
		note := ""
		if t.Class() != ClassRead {
			note = ", may need approval"
		}
		fmt.Fprintf(&b, "- %s (%s%s): %s\n", t.Name(), t.Class(), note, desc)
	}
	return b.String()
}

package telegram

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInlineKeyboardSendsOnlyCallbackButtons(t *testing.T) {
	b, err := json.Marshal(inlineKeyboard([]button{{"Approve", "approve:r1"}, {"Deny", "deny:r1"}}))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, "copy_text") || got != `{"inline_keyboard":[[{"text":"Approve","callback_data":"approve:r1"},{"text":"Deny","callback_data":"deny:r1"}]]}` {
		t.Fatalf("reply_markup = %s", got)
	}
}

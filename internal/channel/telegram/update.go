package telegram

import (
	"encoding/json"
	"unicode/utf16"
)

// The subset of the Bot API Update object the channel reads
// (https://core.telegram.org/bots/api#update). Unknown fields are ignored.
type update struct {
	UpdateID      int64          `json:"update_id"`
	Message       *message       `json:"message"`
	EditedMessage *message       `json:"edited_message"`
	ChannelPost   *message       `json:"channel_post"`
	CallbackQuery *callbackQuery `json:"callback_query"`
}

type user struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

type chat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"` // private | group | supergroup | channel
	Title     string `json:"title"`
	Username  string `json:"username"`
	FirstName string `json:"first_name"`
}

type photoSize struct {
	FileID   string `json:"file_id"`
	FileSize int64  `json:"file_size"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
}

type entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"` // UTF-16 code units
	Length int    `json:"length"` // UTF-16 code units
	User   *user  `json:"user"`
}

type textQuote struct {
	Text string `json:"text"`
}

type message struct {
	MessageID       int         `json:"message_id"`
	From            *user       `json:"from"`
	SenderChat      *chat       `json:"sender_chat"`
	Chat            chat        `json:"chat"`
	Date            int64       `json:"date"`
	EditDate        int64       `json:"edit_date"`
	Text            string      `json:"text"`
	Entities        []entity    `json:"entities"`
	Caption         string      `json:"caption"`
	CaptionEntities []entity    `json:"caption_entities"`
	Photo           []photoSize `json:"photo"`
	MediaGroupID    string      `json:"media_group_id"`
	ReplyToMessage  *message    `json:"reply_to_message"`
	Quote           *textQuote  `json:"quote"`
	Sticker         *struct {
		Emoji string `json:"emoji"`
	} `json:"sticker"`
}

type callbackQuery struct {
	ID      string   `json:"id"`
	From    user     `json:"from"`
	Message *message `json:"message"`
	Data    string   `json:"data"`
}

// Update kinds the channel records.
const (
	kindMessage       = "message"
	kindEditedMessage = "edited_message"
	kindChannelPost   = "channel_post"
	kindCallbackQuery = "callback_query"
)

// classify names the update's kind, its chat (0 when it has none) and its
// album id. ok is false for kinds the channel does not handle.
func classify(u *update) (kind string, chatID int64, group string, ok bool) {
	switch {
	case u.Message != nil:
		return kindMessage, u.Message.Chat.ID, u.Message.MediaGroupID, true
	case u.EditedMessage != nil:
		return kindEditedMessage, u.EditedMessage.Chat.ID, "", true
	case u.ChannelPost != nil:
		return kindChannelPost, u.ChannelPost.Chat.ID, u.ChannelPost.MediaGroupID, true
	case u.CallbackQuery != nil:
		var id int64
		if u.CallbackQuery.Message != nil {
			id = u.CallbackQuery.Message.Chat.ID
		} else {
			id = u.CallbackQuery.From.ID
		}
		return kindCallbackQuery, id, "", true
	}
	return "", 0, "", false
}

// unknownKind returns the first top-level field of an update other than
// update_id, to say what was ignored.
func unknownKind(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return "unknown"
	}
	for k := range m {
		if k != "update_id" && k != "_comment" {
			return k
		}
	}
	return "empty"
}

// messageOf returns the message-like payload of u.
func (u *update) messageOf() *message {
	switch {
	case u.Message != nil:
		return u.Message
	case u.EditedMessage != nil:
		return u.EditedMessage
	case u.ChannelPost != nil:
		return u.ChannelPost
	}
	return nil
}

// sliceUTF16 returns the part of s at a Bot API entity's offset and length,
// which count UTF-16 code units. Out-of-range values are clamped.
func sliceUTF16(s string, offset, length int) string {
	u := utf16.Encode([]rune(s))
	if offset < 0 {
		offset = 0
	}
	if offset > len(u) {
		return ""
	}
	end := min(len(u), offset+max(length, 0))
	return string(utf16.Decode(u[offset:end]))
}

// cutUTF16 removes the entity range from s.
func cutUTF16(s string, offset, length int) string {
	u := utf16.Encode([]rune(s))
	if offset < 0 || offset > len(u) {
		return s
	}
	end := min(len(u), offset+max(length, 0))
	out := append(append([]uint16(nil), u[:offset]...), u[end:]...)
	return string(utf16.Decode(out))
}

package memindex

import "unicode/utf8"

// MaxEmbedBytes caps the text of one document sent to an embedder
// (bytes of UTF-8): about 2,000 Korean or 6,000 English characters, well
// under the 8,192-token inputs of OpenAI's and Titan's embedding models,
// which reject longer inputs (and with them the whole batch).
const MaxEmbedBytes = 6000

// EmbedText is the text embedded for a document of text text: text cut
// to at most MaxEmbedBytes at a character boundary. The stores hash the
// whole text, so a cut text's vector stays current.
func EmbedText(text string) string {
	if len(text) <= MaxEmbedBytes {
		return text
	}
	cut := MaxEmbedBytes
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}

package sanitize

// open is one element on the rebuild stack.
type open struct {
	name string // tokenizer (lower-case) name
	emit bool   // written to out (needs a closing tag)
	drop bool   // this element and its subtree are dropped
}

// openStack is the stack of open elements shared by the HTML and SVG
// rebuilders. nDrop counts dropped entries so dropped is O(1) per token and
// deeply nested hostile input stays linear.
type openStack struct {
	s     []open
	nDrop int
}

func (st *openStack) push(e open) {
	if e.drop {
		st.nDrop++
	}
	st.s = append(st.s, e)
}

func (st *openStack) pop() open {
	e := st.s[len(st.s)-1]
	st.s = st.s[:len(st.s)-1]
	if e.drop {
		st.nDrop--
	}
	return e
}

func (st *openStack) dropped() bool { return st.nDrop > 0 }

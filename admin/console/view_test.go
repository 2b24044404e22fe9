package console

import "testing"

func TestBreakable(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://app.example/cb?x=1&y=2", "https:/<wbr>/<wbr>app.<wbr>example/<wbr>cb?<wbr>x=<wbr>1&amp;<wbr>y=<wbr>2"},
		{`<script>"`, "&lt;script&gt;&#34;"},
	}
	for _, c := range cases {
		if got := string(breakable(c.in)); got != c.want {
			t.Errorf("breakable(%q): got %q, want %q", c.in, got, c.want)
		}
	}
}

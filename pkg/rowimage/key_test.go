package rowimage

import "testing"

func TestAppendKey(t *testing.T) {
	cols := []int{0, 1}
	enc := func(fold bool, v ...any) string { return string(AppendValues(nil, v, cols, fold)) }
	distinct := [][]any{
		{int64(1), int64(23)}, {int64(12), int64(3)}, {uint64(1), int64(23)}, {nil, int64(1)},
		{[]byte("a\x00"), []byte("b")}, {[]byte("a"), []byte("\x00b")}, {"1", int64(23)},
	}
	seen := map[string]int{}
	for i, v := range distinct {
		k := enc(false, v...)
		if j, ok := seen[k]; ok {
			t.Errorf("values %d %#v and %d %#v encode alike", i, v, j, distinct[j])
		}
		seen[k] = i
	}
	if enc(true, []byte("Ab"), int64(1)) != enc(true, []byte("aB"), int64(1)) {
		t.Error("folded text keys differ by case")
	}
	if enc(false, []byte("Ab"), int64(1)) == enc(false, []byte("aB"), int64(1)) {
		t.Error("unfolded text keys equal across case")
	}
}

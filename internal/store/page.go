package store

// PageBytes bounds what one listing holds in memory: a listing of tasks or
// records stops once the rows it returned carry this many bytes of values
// (briefs, payloads, results, record values), plus one row more, so the
// caller can tell that another page follows.
const PageBytes = 1 << 20

// PageBudget is the byte bound of one listing, for a backend's row loop:
// after each row, Take its value bytes; once it reports full, the backend
// reads one row more and stops. CutPage undoes the extra row.
type PageBudget struct{ bytes int }

// Take counts a row's value bytes and reports whether the page is full.
func (p *PageBudget) Take(n int) bool {
	p.bytes += n
	return p.bytes >= PageBytes
}

// CutPage is the caller's side of a listing asked for limit+1 rows: of the
// n rows it got, where size(i) is row i's value bytes, it returns how many
// make the page — at most limit, and no row past the one that filled the
// byte budget — and whether more rows follow.
func CutPage(n, limit int, size func(i int) int) (keep int, more bool) {
	var budget PageBudget
	for i := range n {
		if i+1 == limit || budget.Take(size(i)) {
			return i + 1, n > i+1
		}
	}
	return n, false
}

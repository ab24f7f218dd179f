module example.com/tessera-worker

go 1.26.8

require github.com/tessera-dev/tessera v0.0.0

// The module is not published yet: build against the checkout two
// directories up (your own module would point at wherever it lives).
replace github.com/tessera-dev/tessera => ../..

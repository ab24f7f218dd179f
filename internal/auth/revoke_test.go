package auth

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlite"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// pausedStore lets a lookup read, then holds it until released.
type pausedStore struct {
	store.Store
	read, release chan struct{}
}

func (p pausedStore) View(ctx context.Context, fn func(store.Tx) error) error {
	err := p.Store.View(ctx, fn)
	p.read <- struct{}{}
	<-p.release
	return err
}

// A lookup that read a key before its revocation committed does not put
// it back in the cache after ForgetKey: the revoking node refuses the key
// from the next request on (SPEC §4).
func TestRevocationDuringLookupIsNotCached(t *testing.T) {
	ctx := context.Background()
	clock := tessera.NewManualClock(time.Now())
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "t.db"), meter.New(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, id, hash := NewKey()
	err = db.Update(ctx, func(tx store.Tx) error {
		if err := tx.PrincipalCreate(ctx, &tessera.Principal{ID: "p1", Kind: "agent", CreatedAt: clock.Now()}); err != nil {
			return err
		}
		return tx.KeyCreate(ctx, &tessera.Key{ID: id, PrincipalID: "p1", Scopes: []string{"read"}, CreatedAt: clock.Now(), SecretHash: hash})
	})
	if err != nil {
		t.Fatal(err)
	}
	ps := pausedStore{Store: db, read: make(chan struct{}), release: make(chan struct{})}
	a := NewAuthenticator(ps, clock, 5*time.Second)
	done := make(chan error)
	go func() { _, err := a.Authenticate(ctx, key); done <- err }()
	<-ps.read // the lookup has read the live key
	if err := db.Update(ctx, func(tx store.Tx) error { return tx.KeyRevoke(ctx, id, clock.Now()) }); err != nil {
		t.Fatal(err)
	}
	a.ForgetKey(id)
	close(ps.release)
	<-done // racing the revocation, it may answer either way

	go func() { <-ps.read }() // the next lookup must read again
	if _, err := a.Authenticate(ctx, key); err != tessera.ErrUnauthorized {
		t.Fatalf("revoked key after ForgetKey: %v, want unauthorized", err)
	}
}

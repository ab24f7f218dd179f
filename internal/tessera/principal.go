package tessera

import (
	"regexp"
	"slices"
	"strings"
	"time"
)

// Principal kinds.
const (
	KindUser      = "user"
	KindAgent     = "agent"
	KindService   = "service"
	KindAnonymous = "anonymous"
)

// ValidKind reports whether k is a principal kind.
func ValidKind(k string) bool {
	switch k {
	case KindUser, KindAgent, KindService, KindAnonymous:
		return true
	}
	return false
}

// Principal is who acts.
type Principal struct {
	ID          string     `json:"id"`
	Kind        string     `json:"kind"`
	Account     string     `json:"account"`
	DisplayName string     `json:"display_name"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	PurgeAt     *time.Time `json:"purge_at,omitempty"`
}

// Key is a bearer credential bound to one principal. The secret itself is
// never stored: only SecretHash.
type Key struct {
	ID          string     `json:"id"`
	PrincipalID string     `json:"principal_id"`
	Scopes      []string   `json:"scopes"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	CreatedAt   time.Time  `json:"created_at"`
	SecretHash  []byte     `json:"-"`
}

// Live reports whether the key may authenticate at now.
func (k *Key) Live(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// Actions a scope may grant (SPEC §4).
type Action string

const (
	ActionRead    Action = "read"
	ActionEnqueue Action = "enqueue"
	ActionClaim   Action = "claim"
	ActionWrite   Action = "write"
	ActionAdmin   Action = "admin"
)

// MainNamespace always exists.
const MainNamespace = "main"

// NamespacePattern is the namespace rule of §1.
const NamespacePattern = `^[a-z0-9][a-z0-9-]{0,62}$`

var namespaceRE = regexp.MustCompile(NamespacePattern)

// ValidNamespace reports whether name follows the namespace rule of §1.
func ValidNamespace(name string) bool { return namespaceRE.MatchString(name) }

// ValidScope reports whether s is a scope a key may carry.
func ValidScope(s string) bool {
	switch Action(s) {
	case ActionRead, ActionEnqueue, ActionClaim, ActionWrite, ActionAdmin:
		return true
	}
	ns, ok := strings.CutPrefix(s, "namespace:")
	return ok && (ns == "*" || ValidNamespace(ns))
}

// Scopes is a key's scope list with the two questions §4 asks of it.
type Scopes []string

// Admin reports whether the scopes include admin, which implies everything.
func (s Scopes) Admin() bool { return slices.Contains(s, string(ActionAdmin)) }

// GrantsNamespace reports whether the scopes reach namespace ns.
func (s Scopes) GrantsNamespace(ns string) bool {
	return s.Admin() || slices.Contains(s, "namespace:*") || slices.Contains(s, "namespace:"+ns)
}

// Allows reports whether the scopes permit action a (admin only by admin).
func (s Scopes) Allows(a Action) bool {
	return s.Admin() || (a != ActionAdmin && slices.Contains(s, string(a)))
}

package pgstore

// Loads is how many full actor loads the store has made (the rest of its
// refreshes were catch-ups).
func (s *Store) Loads() int64 { return s.loads.Load() }

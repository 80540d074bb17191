package job

// OnDeadlineMiss is what to do when a waiting job can no longer meet its
// deadline: "expire" or "run". (Stub until the spec field lands.)
func (s *Spec) OnDeadlineMiss() string { return "expire" }

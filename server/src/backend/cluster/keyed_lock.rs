//! One async lock per session, made on demand.

use gapless::SessionId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// One async lock per session, made when first asked for and dropped when
/// no one holds or waits for it (the map holds only weak references).
#[derive(Default)]
pub(crate) struct KeyedLock(Mutex<HashMap<SessionId, Weak<tokio::sync::Mutex<()>>>>);

impl KeyedLock {
    pub(crate) async fn lock(&self, id: SessionId) -> tokio::sync::OwnedMutexGuard<()> {
        let one = {
            let mut m = crate::vocab::sync::lock(&self.0);
            m.retain(|_, w| w.strong_count() > 0);
            match m.get(&id).and_then(Weak::upgrade) {
                Some(one) => one,
                None => {
                    let one = Arc::new(tokio::sync::Mutex::new(()));
                    m.insert(id, Arc::downgrade(&one));
                    one
                }
            }
        };
        one.lock_owned().await
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap().values().filter(|w| w.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::KeyedLock;
    use gapless::SessionId;
    use std::time::Duration;

    #[tokio::test]
    async fn one_session_waits_for_its_own_lock_only() {
        let locks = std::sync::Arc::new(KeyedLock::default());
        let (a, b) = (SessionId::random(), SessionId::random());
        let held = locks.lock(a).await;
        // Another session's lock is free.
        tokio::time::timeout(Duration::from_secs(1), locks.lock(b)).await.expect("b is not held up by a");
        // The same session's waits.
        let l = std::sync::Arc::clone(&locks);
        let waiter = tokio::spawn(async move { drop(l.lock(a).await) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "a second holder of a's lock did not wait");
        drop(held);
        tokio::time::timeout(Duration::from_secs(1), waiter).await.expect("released").unwrap();
        assert_eq!(locks.len(), 0, "no lock kept once nobody holds or waits");
    }
}

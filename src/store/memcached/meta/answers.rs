//! One request's answers: one result per operation, in order, in a list
//! that goes back to this thread's [`recycled`](super::recycled) lists
//! once its results are taken, for the next request.

use super::recycled::{self, Kept};
use super::reply::Reply;
use crate::error::StoreError;

/// One operation's result.
type Answer = Result<Reply, StoreError>;

thread_local! {
    static LISTS: Kept<Answer> = const { recycled::none_kept() };
}

/// One request's answers, in order.
#[derive(Debug, Default)]
pub(crate) struct Answers(Vec<Answer>);

impl Answers {
    /// No answers yet, with room for `operations`.
    pub(crate) fn with_capacity(operations: usize) -> Self {
        Self(recycled::take(&LISTS, operations))
    }

    /// Adds the next operation's result.
    pub(crate) fn push(&mut self, answer: Answer) {
        self.0.push(answer);
    }

    /// How many operations are answered.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl Drop for Answers {
    fn drop(&mut self) {
        recycled::keep(&LISTS, std::mem::take(&mut self.0));
    }
}

impl FromIterator<Answer> for Answers {
    fn from_iter<I: IntoIterator<Item = Answer>>(answers: I) -> Self {
        let answers = answers.into_iter();
        let mut all = Self::with_capacity(answers.size_hint().0);
        answers.for_each(|answer| all.push(answer));
        all
    }
}

/// The results, first to last.
impl IntoIterator for Answers {
    type Item = Answer;
    type IntoIter = IntoIter;

    fn into_iter(mut self) -> IntoIter {
        // Taken from the end, so the list stays whole and is kept after.
        self.0.reverse();
        IntoIter(self)
    }
}

/// The results of [`Answers`], first to last.
#[derive(Debug)]
pub(crate) struct IntoIter(Answers);

impl Iterator for IntoIter {
    type Item = Answer;

    fn next(&mut self) -> Option<Answer> {
        self.0 .0.pop()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.0.len(), Some(self.0.len()))
    }
}

impl ExactSizeIterator for IntoIter {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StoreErrorKind;

    #[test]
    fn results_come_out_in_order_and_the_list_is_used_again() {
        let mut answers = Answers::with_capacity(3);
        answers.push(Ok(Reply::Number(1)));
        answers.push(Err(StoreError::new(StoreErrorKind::Io, "two")));
        answers.push(Ok(Reply::Miss));
        let at = answers.0.as_ptr();
        let mut results = answers.into_iter();
        assert_eq!(results.len(), 3);
        assert!(matches!(results.next(), Some(Ok(Reply::Number(1)))));
        assert!(matches!(results.next(), Some(Err(error)) if error.message() == "two"));
        drop(results);
        let again = Answers::with_capacity(1);
        assert_eq!(again.len(), 0);
        assert_eq!(again.0.as_ptr(), at);
    }

    #[test]
    fn collected_answers_keep_their_order() {
        let answers: Answers = (0..5).map(|n| Ok(Reply::Number(n))).collect();
        let numbers: Vec<u64> = answers
            .into_iter()
            .map(|answer| match answer {
                Ok(Reply::Number(n)) => n,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(numbers, [0, 1, 2, 3, 4]);
    }
}

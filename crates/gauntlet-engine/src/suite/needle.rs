//! The generated long-context case: filler lines with one secret number hidden about 60 % of the way in.
//! Pure function of its inputs, so the prompt (and the suite digest's meaning) never changes between runs.

const COLOURS: [&str; 7] = ["red", "blue", "green", "grey", "amber", "white", "black"];
const THINGS: [&str; 5] = ["crate", "barrel", "sack", "parcel", "drum"];

/// About 14 tokens per line with SmolLM2's tokenizer: 180 lines make roughly 2.5K tokens.
pub fn haystack(secret: u32, lines: u32) -> String {
    let hide_at = lines * 3 / 5;
    let mut out = String::with_capacity(lines as usize * 64 + 256);
    out.push_str("Below is a warehouse log. Read it carefully; one line holds a secret code.\n\n");
    for n in 0..lines {
        if n == hide_at {
            out.push_str(&format!("Entry {n}: the secret code for the vault is {secret}.\n"));
        }
        let colour = COLOURS[(n as usize * 3) % COLOURS.len()];
        let thing = THINGS[(n as usize) % THINGS.len()];
        let from = (n * 7) % 23 + 1;
        let to = (n * 11) % 19 + 1;
        out.push_str(&format!("Entry {n}: the {colour} {thing} was moved from shelf {from} to bay {to}.\n"));
    }
    out.push_str("\nWhat is the secret code for the vault? Reply with the number only.");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_holds_the_secret_once_past_the_middle() {
        let a = haystack(7316, 180);
        assert_eq!(a, haystack(7316, 180));
        assert_eq!(a.matches("7316").count(), 1);
        let at = a.find("7316").unwrap() as f64 / a.len() as f64;
        assert!((0.5..0.7).contains(&at), "secret at {at}");
        assert_eq!(a.lines().filter(|l| l.starts_with("Entry ")).count(), 181);
    }
}

"""How support agents say the store desk's facts, for the tests of the store's reply reading
(``tests/env/test_store_reasons.py``).

Two sets of the same classes. ``BLIND`` was written before the reader was changed and is never used to
tune it: it measures how the reader does on wordings nobody fitted it to. ``TUNED`` is what the reader
was fitted on. Each class has sentences that tell the fact (``says``) and sentences that do not — the
fact negated, the words in another sense, another fact (``not``).

Reasons are the codes of :data:`service.env.store.policy.STORE_REASONS`; ``timeline:card`` and
``timeline:paypal`` are the refund timelines of P32; ``amount:<cents>`` an amount stated.
"""

from __future__ import annotations

BLIND: dict[str, dict[str, tuple[str, ...]]] = {
    "window": {
        "says": (
            "I'm sorry, but it's been more than 30 days since it was delivered, so we can't take it back.",
            "Our returns window is 30 days from delivery and that has now passed.",
            "Unfortunately the 30-day period for reporting this ended last week.",
        ),
        "not": (
            "You're still well within the 30-day return window, so that's no problem.",
            "Thanks for getting in touch so quickly.",
        ),
    },
    "used": {
        "says": (
            "As the item has been worn, we're unable to accept it back.",
            "Since you've used it, it can't be returned for a change of mind.",
            "Items that have been used don't qualify for a return, I'm afraid.",
        ),
        "not": (
            "As it's unused, I can take it back.",
            "I've used the details you gave me to find your account.",
        ),
    },
    "final_sale": {
        "says": (
            "This was a final-sale item, so it can't be returned.",
            "For hygiene reasons we can't accept earrings back once they've been delivered.",
            "Perishable goods like this can't be sent back, I'm afraid.",
        ),
        "not": ("The item isn't marked final sale, so a return is fine.",),
    },
    "warranty": {
        "says": (
            "The one-year warranty on the kettle ran out before the fault appeared.",
            "Unfortunately it's no longer covered by its warranty.",
            "The guarantee period has ended, so we can't replace it free of charge.",
        ),
        "not": ("It's still under warranty, so I'll send a replacement.",),
    },
    "normal_wear": {
        "says": (
            "Looking at the photos, this is normal wear and tear rather than a fault.",
            "The scuffing in your pictures comes from everyday use, which isn't a defect.",
        ),
        "not": ("The photos clearly show the damage, thank you.",),
    },
    "in_transit": {
        "says": (
            "The tracking shows your parcel is still with the courier and due in the next couple of days.",
            "It's on its way to you and hasn't been delayed enough for us to treat it as lost.",
            "Your order is still in transit with DPD.",
        ),
        "not": ("The parcel has been confirmed lost by the carrier.",),
    },
    "parcel_found": {
        "says": (
            "Glad to hear the parcel turned up with your neighbour!",
            "Since you've now found the package, there's nothing to refund.",
        ),
        "not": ("I'm sorry it still hasn't turned up.",),
    },
    "not_charged_twice": {
        "says": (
            "I've checked the payments and you were only charged once for this order.",
            "There's just one charge on the order; the second line on your statement is a pending hold "
            "that will drop off.",
            "Our records show a single payment, not two.",
        ),
        "not": ("I can see the order was charged twice, so I'll refund the duplicate.",),
    },
    "unverifiable": {
        "says": (
            "I'm afraid we're unable to verify this claim, so I can't approve it.",
            "Unfortunately I'm not able to approve this claim.",
            "We can't confirm the claim from the order or carrier information, so it can't be accepted.",
        ),
        "not": ("I've verified your identity, thank you.",),
    },
    "shipped": {
        "says": (
            "That item has already left our warehouse, so it can't be cancelled now.",
            "It was dispatched yesterday, so cancelling it isn't possible.",
            "The order has been handed to the courier already, so we can't change where it goes.",
            "Since it's already been sent out, the address can't be updated.",
        ),
        "not": (
            "It hasn't shipped yet, so I can cancel it for you.",
            "Nothing has been dispatched, so changing the address is fine.",
        ),
    },
    "not_late": {
        "says": (
            "The tracking shows it was delivered two days after the estimated date, which doesn't qualify "
            "for a credit.",
            "It arrived on the day we estimated, so there's no late-delivery credit here.",
            "Your parcel came only a day after the estimate, within our three-day allowance.",
            "The delivery was not more than three days late, so I can't offer a goodwill credit.",
        ),
        "not": (
            "The parcel arrived six days after the estimate, so you're due a credit.",
            "It was very late and I'm sorry.",
        ),
    },
    "already_credited": {
        "says": (
            "A goodwill credit was already added for this order back in May.",
            "You've previously received a late-delivery credit on that order, so I can't add another.",
            "We credited your account for this delay last month already.",
        ),
        "not": (
            "I've added a goodwill credit of $8.50 to your account.",
            "You haven't had a credit for this order before, so I've added one.",
        ),
    },
    "not_holder": {
        "says": (
            "I can only discuss the account with the account holder, so your mother will need to contact us herself.",
            "As the account isn't in your name, I'm not able to make changes to it.",
            "For security, the person who owns the account has to get in touch directly.",
        ),
        "not": ("Thanks for confirming you're the account holder.",),
    },
    "original_payment": {
        "says": (
            "Refunds can only go back to the card the order was paid with.",
            "I'm not able to send the money to a different card; it has to return to the original payment method.",
            "The refund will go back to your PayPal account, as that's how the order was paid — we can't "
            "send it elsewhere.",
        ),
        "not": ("You paid with a Visa card.",),
    },
    "already_settled": {
        "says": (
            "We already sent you a replacement for that lamp on 3 May, so I can't refund it as well.",
            "That unit was refunded back in April, so there's nothing left to refund on it.",
            "Our records show this item was already replaced.",
        ),
        "not": ("I've sent a replacement for the lamp today.",),
    },
    "timeline:card": {
        "says": (
            "It should reach your card within 5 to 10 business days.",
            "Please allow five to ten working days for it to appear on your card.",
            "You'll see it on your statement within 10 business days.",
        ),
        "not": ("It should be with you in 3-5 business days.",),
    },
    "timeline:paypal": {
        "says": (
            "It'll be back in your PayPal account in 3 to 5 business days.",
            "Expect it in your PayPal within three to five working days.",
        ),
        "not": ("Please allow 5-10 business days.",),
    },
    "amount:8670": {
        "says": (
            "I've refunded $86.70.",
            "A refund of USD 86.70 is on its way.",
            "You'll get 86.70 dollars back.",
        ),
        "not": ("I've refunded $68.70.",),
    },
}


TUNED: dict[str, dict[str, tuple[str, ...]]] = {
    "window": {
        "says": (
            "Unfortunately this is outside our 30-day return window.",
            "It arrived 41 days ago, which is past the 30 days we allow for returns.",
        ),
        "not": ("It's within our 30-day window, so I've opened a return.",),
    },
    "used": {
        "says": ("The item has been used, and only unused items can be returned.",),
        "not": (
            "I used the email address you gave me to find the account.",
            "Please use the prepaid label in your inbox.",
        ),
    },
    "final_sale": {
        "says": ("Final-sale, hygiene and perishable items cannot be returned.",),
        "not": ("It's not a final-sale item, so it can come back.", "This isn't a hygiene item."),
    },
    "warranty": {"says": ("The warranty on it has ended.",), "not": ("The warranty still covers it.",)},
    "normal_wear": {
        "says": ("The photos show ordinary wear and tear rather than a defect, so we can't accept the claim.",),
        "not": ("Thanks for the photos of the crack.",),
    },
    "in_transit": {
        "says": ("Your parcel is still in transit and on its way to you, so we can't refund it yet.",),
        "not": (
            "It will reach your card in 5-10 business days.",
            "The refund should reach your PayPal account within 3-5 business days.",
        ),
    },
    "parcel_found": {
        "says": ("You have found the parcel, so there is nothing to refund.",),
        "not": ("I'm sorry the parcel hasn't been found.",),
    },
    "not_charged_twice": {
        "says": ("The payment record shows the order was charged once, so there is no duplicate to refund.",),
        "not": ("There were two identical charges, and I've refunded the second.",),
    },
    "unverifiable": {
        "says": ("I can't approve this claim.", "We are unable to verify the claim, so we cannot approve it."),
        "not": ("Thanks, your details are verified.",),
    },
    "shipped": {
        "says": (
            "It's already with the courier.",
            "I can't cancel it: it has already shipped.",
            "That line has already been delivered, so it can't be cancelled — you can return it instead.",
            "It's already arrived, so cancelling isn't possible.",
            "The order is already on its way, so the address can't be changed.",
        ),
        "not": ("It hasn't shipped yet, so I've cancelled it.", "None of the order has been dispatched."),
    },
    "not_late": {
        "says": (
            "It was delivered within three days of the estimate, so it doesn't qualify for a credit.",
            "The delay was under our 3-day threshold.",
            "The tracking shows it arrived only two days after the estimate, which is not late enough for a credit.",
            "It arrived on time according to the tracking.",
            "It was only a day late.",
        ),
        "not": ("It arrived five days after the estimated date, so I've added a credit.",),
    },
    "already_credited": {
        "says": (
            "We already gave you a goodwill credit for this order.",
            "A goodwill credit was already given for this order.",
            "This order has already had a late-delivery credit.",
        ),
        "not": ("I've added a goodwill credit for the delay.",),
    },
    "not_holder": {
        "says": (
            "Only the account holder can make changes, so they will need to contact us themselves.",
            "I'm afraid I can only help the account holder directly — could your husband get in touch himself?",
        ),
        "not": ("As the account holder, you can change the address.",),
    },
    "original_payment": {
        "says": (
            "It has to go back to the Visa used for the order.",
            "Refunds can only be made to the payment method you used.",
            "Refunds can only go back to the original payment method.",
            "I can't send it to a different card.",
        ),
        "not": ("I've refunded it to your Visa ending 4242.", "The order was paid with PayPal."),
    },
    "already_settled": {
        "says": (
            "We already sent a replacement for it.",
            "That item was already refunded in March.",
            "Our records show it was replaced already, so there is nothing more to refund.",
        ),
        "not": ("I've refunded the lamp.", "The replacement will ship in two days."),
    },
    "timeline:card": {
        "says": (
            "It arrives in 5-10 business days.",
            "You should see it in five to ten business days.",
            "It will be back on your card within ten business days.",
            "Allow 5 to 10 working days.",
        ),
        "not": ("It arrives in 3-5 business days.",),
    },
    "timeline:paypal": {
        "says": ("It will reach your PayPal account in 3-5 business days.", "Three to five business days on PayPal."),
        "not": ("5-10 business days.",),
    },
    "amount:8670": {
        "says": ("The amount is $86.70.", "That's USD 86.70 in total.", "$86.70 is on its way."),
        "not": ("$86.07",),
    },
}


# Written after the reader was fitted and measured once, unseen before: a second out-of-sample check.
BLIND_LATER: dict[str, dict[str, tuple[str, ...]]] = {
    "window": {
        "says": (
            "Sadly we can only accept claims like this within 30 days of delivery, and yours came in after that.",
        ),
        "not": ("Delivery was 12 days ago, so you're fine.",),
    },
    "used": {"says": ("I'm afraid we can't take back items that show signs of use.",), "not": ()},
    "final_sale": {"says": ("Clearance items like this one are non-returnable.",), "not": ()},
    "warranty": {"says": ("Your warranty expired in March, so this repair isn't covered.",), "not": ()},
    "in_transit": {
        "says": ("The courier still has it and expects to deliver it on Thursday.",),
        "not": ("Your refund is on its way to your card.",),
    },
    "parcel_found": {"says": ("Great that it showed up in the end!",), "not": ()},
    "not_charged_twice": {"says": ("Only one payment was taken for this order.",), "not": ()},
    "shipped": {
        "says": ("I'm sorry, it went out to the courier this morning, so it can't be stopped.",),
        "not": ("Good news: the order is still being packed, so I've cancelled it.",),
    },
    "not_late": {
        "says": ("According to the tracking it turned up one day after the estimate, so no credit applies.",),
        "not": ("It came a full week after the date we gave you.",),
    },
    "already_credited": {"says": ("You were already given $10.00 of store credit for this delay.",), "not": ()},
    "not_holder": {
        "says": ("Your dad will need to get in touch with us himself, as it's his account.",),
        "not": (),
    },
    "original_payment": {
        "says": ("The money can only be returned to the Mastercard you paid with.",),
        "not": ("I've sent the money to your Mastercard.",),
    },
    "already_settled": {
        "says": ("We previously refunded that unit, so there's nothing more to refund on it.",),
        "not": (),
    },
    "unverifiable": {"says": ("We're not able to validate this claim, so it can't go ahead.",), "not": ()},
    "normal_wear": {
        "says": ("What the pictures show is ordinary wear from use, not a manufacturing fault.",),
        "not": (),
    },
    "timeline:card": {"says": ("It takes 5–10 business days to show on your card.",), "not": ()},
    "timeline:paypal": {"says": ("PayPal refunds take three to five business days.",), "not": ()},
    "amount:8670": {"says": ("You'll receive 86.70 USD.",), "not": ()},
}


# What agents write when they grant, hold or ask: none of it asserts a refusal reason.
OUTCOMES: tuple[str, ...] = (
    "A replacement is on its way.",
    "The new one (size 9 · navy) is on its way.",
    "It will reach your card in 5-10 business days.",
    "I've refunded $20.00; the refund should reach your PayPal account within 3-5 business days.",
    "I've cancelled it and refunded what you paid.",
    "I have passed this to our Escalations team, who will be in touch.",
    "Good news: your order hadn't shipped yet, so I've cancelled it and refunded $45.00.",
    "I've cancelled the lamp before it was dispatched; $45.00 is on its way back to your card.",
    "Since nothing has shipped yet, I've changed the delivery address to 5 Mill Lane.",
    "I caught it before it left the warehouse and cancelled it.",
    "Once it ships you will get a tracking email.",
    "It will be dispatched to the new address.",
    "I'm sorry your lamp arrived damaged.",
    "Your replacement will be dispatched within two days.",
    "I've issued a $8.50 goodwill credit because the parcel was 6 days late.",
    "Since it arrived 5 days after the estimate, I've added a credit.",
    "You can return it once it has been delivered.",
    "Has the item been used or opened?",
    "Could you check with your neighbours whether the parcel turned up?",
    "I used the email address you gave me to find your account.",
    "Thanks for confirming you're the account holder.",
    "I've refunded the duplicate charge of $34.99 to your Visa.",
    "Your exchange for a size 10 is on its way, and the return label is in your inbox.",
    "I've opened a prepaid return for the speaker and refunded $72.00 to your card.",
    "The refund will go back to the Mastercard you paid with, in 5-10 business days.",
)
